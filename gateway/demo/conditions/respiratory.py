"""Conditions of the airways and lungs. Phrase pools are Italian clinical shorthand."""

from gateway.demo.conditions.model import WINTER, Condition

BRONCHIOLITIS = Condition(
    "bronchiolitis", (("bronchiolite", "f"), ("bronchiolite acuta", "f")),
    0.22, (0.40, 0.40, 0.12, 0.08), (1, 4, 23), WINTER, (0.5, 0.2, 0.3), "resp", 0.45, 0.7,
    symptoms=("tosse", "rinorrea sierosa", "difficoltà respiratoria", "respiro affannoso",
              "ridotta alimentazione", "rifiuto parziale delle poppate", "tosse stizzosa",
              "congestione nasale", "respiro sibilante", "irritabilità",
              "pause respiratorie", "poppate interrotte dalla tosse"),
    signs=("rientramenti al giugulo", "rientramenti sottocostali",
           "crepitii fini diffusi bilateralmente", "sibili espiratori diffusi",
           "fischi e sibili bilaterali", "MV ridotto alle basi", "espirio prolungato",
           "alitamento delle pinne nasali", "tachipnea con rientramenti intercostali",
           "rantoli crepitanti teleinspiratori bilaterali", "tirage sottocostale"),
    proof=("Tampone nasofaringeo: RSV positivo.", "Ricerca antigene RSV su aspirato nasale "
           "positiva.", "Test rapido RSV positivo.", "Pannello virale respiratorio "
           "positivo per RSV.", "Tampone rino-faringeo positivo per Rhinovirus."),
    pending=("Tampone nasofaringeo per RSV in corso.", "In attesa di esito del pannello "
             "virale.", "Ricerca RSV richiesta, esito non ancora disponibile.",
             "Test RSV non eseguito."),
    negative=("Obiettività toracica negativa.", "Torace libero, non crepitii né sibili.",
              "Dinamica respiratoria regolare, SpO2 stabile in aa."),
    therapy=("lavaggi nasali con soluzione fisiologica", "aspirazione delle secrezioni "
             "nasali", "O2 terapia con occhialini nasali a {o2} l/min",
             "ossigenoterapia ad alti flussi (HFNC) 2 l/kg/min", "aerosol con soluzione "
             "ipertonica 3%", "idratazione ev con soluzione glucosalina",
             "alimentazione frazionata", "paracetamolo {pcm} mg se TC > 38 °C",
             "alimentazione con SNG per scarsa assunzione"),
    advice=("lavaggi nasali prima dei pasti", "pasti piccoli e frequenti",
            "posizione semiseduta durante il sonno", "controllo dal PLS entro 24-48 ore",
            "tornare in PS se peggiora la dinamica respiratoria, se compaiono pause "
            "respiratorie o se si alimenta meno della metà del solito", "evitare il fumo "
            "passivo", "contare i pannolini bagnati"),
    alternatives=("rinofaringite", "IVAS", "rinite virale", "tracheite virale"),
    related=("otitis", "pneumonia", "conjunctivitis", "gastroenteritis"),
)


PNEUMONIA = Condition(
    "pneumonia", (("polmonite", "f"), ("broncopolmonite", "f"),
                  ("polmonite acquisita in comunità", "f")),
    0.08, (0.45, 0.25, 0.17, 0.13), (6, 36, 168), WINTER, (0.45, 0.2, 0.35), "resp", 0.9,
    0.5,
    symptoms=("febbre elevata", "tosse produttiva", "tosse", "respiro frequente",
              "dolore toracico", "dolore addominale", "astenia marcata", "inappetenza",
              "brividi", "febbre persistente nonostante antipiretico"),
    signs=("crepitii localizzati alla base {side}", "MV ridotto in sede basale {side}",
           "ipofonesi plessica alla base {side}", "soffio bronchiale in regione "
           "sottoscapolare {side}", "rantoli a piccole bolle in campo medio {side}",
           "tachipnea lieve", "FVT aumentato a {side}"),
    proof=("Rx torace: addensamento parenchimale lobare inferiore {side}.", "Rx torace: "
           "focolaio broncopneumonico in sede paracardiaca {side}.", "Ecografia "
           "polmonare: consolidamento subpleurico con broncogramma aereo a {side}."),
    pending=("Rx torace richiesto, in attesa di refertazione.", "Ecografia polmonare "
             "programmata.", "In attesa di esito degli esami ematici."),
    negative=("Rx torace: non addensamenti parenchimali in atto.", "Rx torace negativo per "
              "lesioni pleuroparenchimali.", "Ecografia polmonare: non consolidamenti.",
              "Ascoltazione toracica negativa per reperti focali."),
    therapy=("amoxicillina {amox} mg x3/die per {abx} giorni", "ceftriaxone {ceftr} mg ev "
             "1 volta/die", "claritromicina {clari} mg x2/die", "paracetamolo {pcm} mg "
             "al bisogno", "O2 terapia se SpO2 < 92%", "idratazione ev"),
    advice=("completare il ciclo di antibiotico", "controllo clinico dal PLS a 48-72 ore",
            "tornare se febbre oltre 72 ore di terapia o difficoltà respiratoria",
            "Rx torace di controllo non necessaria se buona evoluzione"),
    alternatives=("tracheite", "IVAS", "sindrome influenzale"),
    related=("bronchiolitis", "asthma", "bronchitis", "otitis"),
)


ASTHMA = Condition(
    "asthma", (("asma bronchiale", "f"), ("crisi asmatica", "f"),
               ("riacutizzazione asmatica", "f")),
    0.08, (0.45, 0.25, 0.17, 0.13), (36, 84, 192), (9, 10, 11, 3, 4, 5), (0.5, 0.35, 0.15),
    "resp", 0.15, 0.6,
    symptoms=("tosse notturna", "difficoltà respiratoria", "respiro sibilante",
              "senso di costrizione toracica", "dispnea da sforzo", "tosse secca "
              "stizzosa", "fatica a parlare", "risvegli notturni per la tosse"),
    signs=("sibili espiratori diffusi", "espirio prolungato", "MV ridotto diffusamente",
           "rientramenti intercostali", "fischi bilaterali", "uso dei muscoli accessori",
           "parla per frasi brevi"),
    proof=("Spirometria: deficit ostruttivo (FEV1 {fev1}% del predetto) reversibile dopo "
           "broncodilatatore.", "Risposta netta al salbutamolo con risoluzione dei "
           "sibili.", "Prick test positivi per dermatofagoidi; test di broncodilatazione "
           "positivo."),
    pending=("Programmata spirometria con test di broncodilatazione.", "Da eseguire prick "
             "test e spirometria in ambulatorio allergologico.", "Valutare la risposta al "
             "broncodilatatore al controllo."),
    negative=("Spirometria nella norma, test di broncodilatazione negativo.", "Torace "
              "libero, non sibili né espirio prolungato.", "Picco di flusso nella norma."),
    therapy=("salbutamolo spray 100 mcg {puff} puff con distanziatore ogni 20 minuti per 3 "
             "volte, poi ogni 4 ore", "salbutamolo per aerosol", "prednisone {pred} mg/die "
             "per 3 giorni", "betametasone {betam} mg per os", "budesonide per aerosol "
             "0,5 mg x2/die", "ipratropio bromuro per aerosol", "fluticasone spray 125 mcg "
             "x2/die con distanziatore", "O2 terapia"),
    advice=("salbutamolo al bisogno", "proseguire la terapia di fondo con steroide "
            "inalatorio", "controllo allergologico", "piano d'azione scritto consegnato "
            "ai genitori", "evitare il fumo passivo"),
    alternatives=("tosse post-virale", "IVAS", "reflusso gastroesofageo"),
    related=("dermatitis", "pneumonia", "bronchiolitis", "bronchitis"),
)


CROUP = Condition(
    "croup", (("laringite acuta", "f"), ("laringotracheite", "f"),
              ("laringite ipoglottica", "f"), ("croup", "m")),
    0.05, (0.45, 0.25, 0.17, 0.13), (6, 24, 72), (10, 11, 12, 1, 2, 3), (0.8, 0.1, 0.1),
    "airway resp", 0.35, 0.3,
    symptoms=("tosse abbaiante", "raucedine", "stridore inspiratorio", "disfonia",
              "tosse metallica a esordio notturno", "febbricola", "rinorrea",
              "agitazione notturna"),
    signs=("stridore inspiratorio a riposo", "stridore solo con l'agitazione",
           "rientramenti sovrasternali", "voce rauca", "Westley score {westley}"),
    proof=("Westley score {westley}, tipica tosse abbaiante con stridore.", "Rapida "
           "risposta al desametasone."),
    pending=("Rivalutazione dopo aerosol.", "Osservazione in OBI per 4 ore."),
    negative=("Non stridore, voce normale.", "Non tosse abbaiante né disfonia all'esame."),
    therapy=("desametasone {desa} mg per os in dose unica", "budesonide 2 mg per aerosol",
             "adrenalina 1:1000 {adr} ml per aerosol", "aria umidificata",
             "betametasone {betam} mg per os"),
    advice=("tornare in PS se stridore a riposo", "ambiente umidificato",
            "tenere il bambino tranquillo", "in caso di crisi notturna portarlo all'aria "
            "fresca"),
    alternatives=("rinofaringite", "tracheite virale"),
    related=("otitis", "bronchiolitis"),
)


BRONCHITIS = Condition(
    "bronchitis", (("bronchite acuta", "f"), ("bronchite", "f"), ("tracheobronchite", "f")),
    0.05, (0.45, 0.25, 0.17, 0.13), (24, 60, 168), WINTER, (0.3, 0.65, 0.05), "resp",
    0.4, 0.2,
    symptoms=("tosse catarrale", "tosse produttiva", "febbricola", "rinorrea",
              "tosse persistente da una settimana", "catarro"),
    signs=("ronchi diffusi", "rumori grossolani bilaterali modificabili con la tosse",
           "rantoli a medie bolle", "MV aspro"),
    proof=("Rx torace: accentuazione della trama bronco-vasale senza addensamenti.",
           "Reperto auscultatorio tipico, murmure conservato."),
    pending=("Da rivalutare per eventuale Rx torace se la tosse persiste.",),
    negative=("Torace: MV normotrasmesso su tutto l'ambito, non rumori aggiunti.",),
    therapy=("aerosol con soluzione fisiologica", "lavaggi nasali", "paracetamolo {pcm} mg "
             "al bisogno", "amoxicillina solo se febbre oltre 72 ore"),
    advice=("bere molto", "controllo dal PLS tra 3-5 giorni", "tornare se compare "
            "difficoltà respiratoria"),
    alternatives=("tosse post-virale", "IVAS", "rinosinusite"),
    related=("asthma", "pneumonia", "otitis"),
)
