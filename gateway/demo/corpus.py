"""Seeded generator of the demo corpus: synthetic Italian paediatric visit notes with labels.

Every note has a primary condition with a status (confirmed, suspected, excluded, history);
about 30% also mention further conditions with their own status. Notes are composed from
interchangeable phrase pools, so a confirmed and a suspected note about the same condition
share their symptoms, signs, vitals and treatments and differ only in how certain the
diagnosis is: the case Prisma is built for. Nothing comes from real patients and no names
appear. Pure standard library: `random.Random(seed)` only, so one seed gives one corpus.

    python -m gateway.demo.corpus demo.csv --n 2000 --seed 0
"""

from __future__ import annotations

import argparse
import calendar
import csv
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

STATUSES = ("confirmed", "suspected", "excluded", "history")
SETTINGS = ("pronto soccorso", "ambulatorio", "reparto")
CSV_FIELDS = (
    "id", "text", "labels", "condition", "status", "age_months", "sex", "visit_date", "setting",
)


@dataclass(frozen=True)
class DemoNote:
    id: str
    text: str
    labels: list[str]
    condition: str
    status: str
    age_months: int
    sex: str
    visit_date: str
    setting: str


@dataclass(frozen=True)
class _Condition:
    """One condition and the phrase pools its notes are built from."""

    key: str
    terms: tuple[tuple[str, str], ...]  # (Italian name, grammatical gender "m" | "f")
    weight: float  # share of primary notes
    statuses: tuple[float, float, float, float]  # P(status) as primary, in STATUSES order
    ages: tuple[int, int, int]  # (min, mode, max) age in months of an active episode
    season: tuple[int, ...]  # calendar months of its epidemic season; () for none
    settings: tuple[float, float, float]  # P(setting) in SETTINGS order
    system: str  # organ system whose normal findings its own signs replace
    fever: float  # probability of fever when active
    distress: float  # 0..1 respiratory distress when active: lowers SpO2, raises FR
    symptoms: tuple[str, ...]
    signs: tuple[str, ...]
    proof: tuple[str, ...]  # findings that confirm it (confirmed notes only)
    pending: tuple[str, ...]  # work-up still open (suspected notes only)
    negative: tuple[str, ...]  # findings that rule it out (excluded mentions only)
    therapy: tuple[str, ...]
    advice: tuple[str, ...]
    alternatives: tuple[str, ...]  # unlabelled diagnosis given when it is excluded
    related: tuple[str, ...] = ()  # conditions often mentioned alongside
    secondary: bool = True  # may appear as a secondary mention


_WINTER = (11, 12, 1, 2, 3)

CONDITIONS: tuple[_Condition, ...] = (
    _Condition(
        "bronchiolitis", (("bronchiolite", "f"), ("bronchiolite acuta", "f")),
        0.22, (0.40, 0.40, 0.12, 0.08), (1, 4, 23), _WINTER, (0.5, 0.2, 0.3), "resp", 0.45, 0.7,
        symptoms=("tosse", "rinorrea sierosa", "difficoltà respiratoria", "respiro affannoso",
                  "ridotta alimentazione", "rifiuto parziale delle poppate", "tosse stizzosa",
                  "congestione nasale", "respiro sibilante", "irritabilità",
                  "pause respiratorie riferite dai genitori", "poppate interrotte dalla tosse"),
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
    ),
    _Condition(
        "otitis", (("otite media acuta", "f"), ("OMA", "f"), ("otite", "f")),
        0.09, (0.45, 0.25, 0.17, 0.13), (6, 18, 84), (10, 11, 12, 1, 2, 3), (0.35, 0.6, 0.05),
        "ear", 0.6, 0.0,
        symptoms=("otalgia {side}", "febbre", "irritabilità notturna", "pianto inconsolabile",
                  "si tocca ripetutamente l'orecchio", "otorrea", "risvegli notturni frequenti",
                  "rinorrea", "riduzione dell'appetito"),
        signs=("MT {side} iperemica ed estroflessa", "membrana timpanica {side} opaca e bombata",
               "otorrea purulenta dal CUE {side}", "MT iperemica con perdita del triangolo "
               "luminoso", "livello idroaereo retrotimpanico {side}"),
        proof=("Otoscopia: MT {side} iperemica, estroflessa, con essudato retrotimpanico.",
               "All'otoscopia membrana timpanica {side} bombata e opaca."),
        pending=("Otoscopia difficoltosa per cerume, da ripetere.", "Visualizzazione "
                 "parziale della MT per scarsa collaborazione.", "Rivalutazione otoscopica "
                 "tra 48 ore."),
        negative=("Otoscopia: MT normotrasparenti bilateralmente.", "MT integre, triangolo "
                  "luminoso presente bilateralmente.", "Condotti uditivi liberi, MT nella "
                  "norma."),
        therapy=("amoxicillina {amox} mg x3/die per {abx} giorni", "amoxicillina-clavulanato "
                 "{amoxclav} mg x2/die per 10 giorni", "ibuprofene {ibu} mg al bisogno",
                 "paracetamolo {pcm} mg al bisogno per il dolore", "vigile attesa per 48-72 ore "
                 "con sola terapia antidolorifica"),
        advice=("rivalutazione dal PLS se febbre oltre 48-72 ore", "terapia antidolorifica "
                "regolare nelle prime 24 ore", "lavaggi nasali", "non bagnare l'orecchio "
                "finché c'è secrezione"),
        alternatives=("otalgia riflessa da dentizione", "tappo di cerume", "rinofaringite"),
        related=("bronchiolitis", "conjunctivitis", "pharyngitis", "febrile_seizure"),
    ),
    _Condition(
        "pneumonia", (("polmonite", "f"), ("broncopolmonite", "f"),
                      ("polmonite acquisita in comunità", "f")),
        0.08, (0.45, 0.25, 0.17, 0.13), (6, 36, 168), _WINTER, (0.45, 0.2, 0.35), "resp", 0.9,
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
    ),
    _Condition(
        "gastroenteritis", (("gastroenterite acuta", "f"), ("GEA", "f"),
                            ("gastroenterite", "f")),
        0.09, (0.45, 0.25, 0.17, 0.13), (3, 24, 120), (12, 1, 2, 3, 4), (0.5, 0.35, 0.15),
        "abd", 0.4, 0.0,
        symptoms=("vomito", "vomiti ripetuti", "diarrea", "scariche liquide ({count} nelle "
                  "ultime 24 ore)", "dolore addominale crampiforme", "inappetenza",
                  "febbricola", "riduzione della diuresi", "nausea", "feci acquose"),
        signs=("addome trattabile, lievemente dolente diffusamente", "peristalsi vivace",
               "mucose asciutte", "occhi alonati", "lieve disidratazione (stimata 3-5%)",
               "refill capillare 2 sec", "turgore cutaneo ridotto"),
        proof=("Ricerca rotavirus nelle feci positiva.", "Antigene adenovirus fecale positivo.",
               "Coprocoltura positiva per Campylobacter.", "Ricerca norovirus su feci "
               "positiva."),
        pending=("Coprocoltura e ricerca virus fecali inviate, esito in attesa.", "Richiesta "
                 "ricerca rotavirus/adenovirus su feci."),
        negative=("Addome trattabile, non dolente, peristalsi presente.", "Alvo regolare, non "
                  "vomito né diarrea nelle ultime 48 ore."),
        therapy=("reidratazione orale con SRO {ml} ml/kg in 4 ore", "SRO a piccoli sorsi "
                 "frequenti", "ondansetron {ond} mg per os", "reidratazione ev con soluzione "
                 "fisiologica 20 ml/kg", "probiotico (Lactobacillus GG)", "paracetamolo "
                 "{pcm} mg al bisogno"),
        advice=("proseguire SRO dopo ogni scarica", "dieta libera appena tollerata",
                "monitorare la diuresi", "tornare se vomito incoercibile, sangue nelle feci "
                "o sonnolenza", "lavare spesso le mani in famiglia"),
        alternatives=("vomito da tosse", "coliche addominali", "stipsi",
                      "intolleranza alimentare transitoria"),
        related=("uti", "otitis", "febrile_seizure"),
    ),
    _Condition(
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
    ),
    _Condition(
        "dermatitis", (("dermatite atopica", "f"), ("eczema atopico", "m")),
        0.05, (0.45, 0.25, 0.17, 0.13), (2, 12, 120), (), (0.05, 0.9, 0.05), "skin", 0.02, 0.0,
        symptoms=("prurito intenso", "lesioni cutanee arrossate", "pelle secca",
                  "grattamento notturno", "lesioni al volto e alle pieghe", "sonno disturbato "
                  "dal prurito"),
        signs=("chiazze eritemato-desquamative alle pieghe antecubitali e poplitee", "xerosi "
               "cutanea diffusa", "lesioni eczematose alle guance", "escoriazioni da "
               "grattamento", "lichenificazione ai polsi", "lesioni essudative al volto"),
        proof=("SCORAD {scorad}.", "Criteri di Hanifin-Rajka soddisfatti.", "IgE totali {ige} "
               "kUI/l, prick test positivi per alimenti."),
        pending=("Valutazione dermatologica richiesta.", "Da rivalutare dopo 2 settimane di "
                 "emollienti."),
        negative=("Cute integra, non lesioni eczematose.", "Cute elastica, normoidratata."),
        therapy=("emollienti 2 volte al giorno", "idrocortisone crema 1% per 7 giorni",
                 "metilprednisolone aceponato crema 1 volta/die per 5 giorni", "cetirizina "
                 "gocce la sera", "bagno breve con detergente oleoso"),
        advice=("abiti in cotone", "unghie corte", "evitare bagni caldi prolungati",
                "controllo tra 2-4 settimane"),
        alternatives=("eritema aspecifico", "miliaria", "orticaria acuta", "punture di insetto"),
        related=("asthma", "conjunctivitis", "varicella"),
    ),
    _Condition(
        "pharyngitis", (("faringotonsillite", "f"), ("faringotonsillite streptococcica", "f"),
                        ("tonsillite acuta", "f")),
        0.08, (0.45, 0.25, 0.17, 0.13), (36, 72, 168), (11, 12, 1, 2, 3, 4), (0.4, 0.55, 0.05),
        "throat", 0.85, 0.0,
        symptoms=("mal di gola", "odinofagia", "febbre elevata", "disfagia", "cefalea",
                  "dolore addominale", "alitosi", "rifiuto del cibo"),
        signs=("tonsille ipertrofiche con essudato biancastro", "faringe iperemico con "
               "petecchie al palato", "linfonodi laterocervicali aumentati di volume e "
               "dolenti", "tonsille iperemiche", "essudato tonsillare bilaterale"),
        proof=("Tampone faringeo rapido per SBEA positivo.", "Test rapido streptococco "
               "positivo.", "Coltura del tampone faringeo positiva per SBEA."),
        pending=("Tampone faringeo colturale inviato, esito in attesa.", "Test rapido per SBEA "
                 "da eseguire."),
        negative=("Faringe lievemente iperemico, tonsille non ipertrofiche, non essudato.",
                  "Orofaringe indenne."),
        therapy=("amoxicillina {amox50} mg x2/die per 10 giorni", "ibuprofene {ibu} mg al "
                 "bisogno", "paracetamolo {pcm} mg al bisogno", "benzatin-penicillina im in "
                 "unica dose"),
        advice=("completare i 10 giorni di antibiotico", "rientro in comunità dopo 24 ore di "
                "terapia", "bere spesso", "cibi morbidi e freschi"),
        alternatives=("rinofaringite virale", "afte orali", "stomatite"),
        related=("otitis", "conjunctivitis", "febrile_seizure"),
    ),
    _Condition(
        "uti", (("infezione delle vie urinarie", "f"), ("IVU", "f"),
                ("pielonefrite acuta", "f")),
        0.06, (0.45, 0.25, 0.17, 0.13), (1, 12, 144), (), (0.5, 0.25, 0.25), "urine", 0.85, 0.0,
        symptoms=("febbre elevata", "disuria", "pollachiuria", "urine maleodoranti",
                  "dolore addominale", "vomito", "irritabilità", "pianto alla minzione",
                  "enuresi secondaria"),
        signs=("Giordano positivo a {side}", "dolorabilità in sede sovrapubica",
               "addome lievemente dolente ai fianchi"),
        proof=("Stick urine: leucociti +++, nitriti positivi. Urinocoltura: E. coli > 100.000 "
               "UFC/ml.", "Urinocoltura da cateterismo positiva per E. coli.", "Esame urine: "
               "leucocituria e batteriuria; urinocoltura positiva."),
        pending=("Stick urine: leucociti +, nitriti negativi; urinocoltura inviata.", "In "
                 "attesa di esito dell'urinocoltura."),
        negative=("Stick urine negativo.", "Esame urine nella norma, urinocoltura negativa.",
                  "Stick urine su mitto intermedio negativo per leucociti e nitriti."),
        therapy=("amoxicillina-clavulanato {amoxclav} mg x2/die per 10 giorni", "cefixima "
                 "{cefix} mg/die per 10 giorni", "ceftriaxone {ceftr} mg ev/die",
                 "paracetamolo {pcm} mg al bisogno"),
        advice=("ecografia renale e vescicale a distanza", "idratazione abbondante",
                "rivalutazione a 48-72 ore", "tornare se febbre oltre 48 ore di terapia"),
        alternatives=("virosi aspecifica", "sindrome febbrile virale"),
        related=("gastroenteritis", "febrile_seizure"),
    ),
    _Condition(
        "croup", (("laringite acuta", "f"), ("laringotracheite", "f"),
                  ("laringite ipoglottica", "f"), ("croup", "m")),
        0.05, (0.45, 0.25, 0.17, 0.13), (6, 24, 72), (10, 11, 12, 1, 2, 3), (0.8, 0.1, 0.1),
        "airway", 0.35, 0.3,
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
    ),
    _Condition(
        "varicella", (("varicella", "f"),),
        0.04, (0.45, 0.25, 0.17, 0.13), (12, 48, 120), (2, 3, 4, 5, 6), (0.2, 0.75, 0.05),
        "skin", 0.5, 0.0,
        symptoms=("esantema pruriginoso", "vescicole al tronco", "febbricola", "prurito",
                  "inappetenza", "lesioni cutanee a diversa evoluzione"),
        signs=("esantema maculo-papulo-vescicolare a diverso stadio evolutivo", "vescicole su "
               "base eritematosa al tronco e al capillizio", "alcune lesioni crostose",
               "enantema al cavo orale", "lesioni escoriate da grattamento"),
        proof=("Esantema polimorfo tipico \"a cielo stellato\".", "Contatto con compagno di "
               "classe con analogo esantema 15 giorni fa; lesioni tipiche."),
        pending=("Lesioni iniziali, da rivalutare nelle prossime 24-48 ore.", "In attesa "
                 "dell'evoluzione dell'esantema."),
        negative=("Lesioni papulose senza vescicole, tutte allo stesso stadio.", "Cute "
                  "indenne da vescicole."),
        therapy=("cetirizina gocce", "paracetamolo {pcm} mg al bisogno (evitare ibuprofene)",
                 "lozione lenitiva", "aciclovir {acic} mg x4/die per 5 giorni"),
        advice=("non frequentare la comunità fino a crostificazione di tutte le lesioni",
                "unghie corte", "evitare FANS", "tornare se lesioni infette o febbre alta "
                "persistente"),
        alternatives=("punture di insetto", "strofulo", "orticaria", "esantema virale "
                      "aspecifico"),
        related=("dermatitis", "conjunctivitis"),
    ),
    _Condition(
        "bronchitis", (("bronchite acuta", "f"), ("bronchite", "f"), ("tracheobronchite", "f")),
        0.05, (0.45, 0.25, 0.17, 0.13), (24, 60, 168), _WINTER, (0.3, 0.65, 0.05), "resp",
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
    ),
    _Condition(
        "conjunctivitis", (("congiuntivite", "f"), ("congiuntivite batterica", "f"),
                           ("congiuntivite acuta", "f")),
        0.04, (0.45, 0.25, 0.17, 0.13), (1, 36, 168), (), (0.25, 0.7, 0.05), "eye", 0.15, 0.0,
        symptoms=("occhio rosso", "secrezione oculare giallastra", "palpebre incollate al "
                  "risveglio", "lacrimazione", "bruciore oculare", "prurito oculare"),
        signs=("iperemia congiuntivale bilaterale", "secrezione muco-purulenta {side}",
               "lieve edema palpebrale", "cornea trasparente"),
        proof=("Tampone congiuntivale positivo per H. influenzae.", "Secrezione purulenta "
               "tipica alla valutazione."),
        pending=("Tampone congiuntivale inviato.", "Visita oculistica se non migliora in 48 "
                 "ore."),
        negative=("Congiuntive rosee, non secrezioni.", "Occhi: non iperemia né secrezioni."),
        therapy=("collirio antibiotico (tobramicina) 1 goccia x4/die per 7 giorni", "pulizia "
                 "con soluzione fisiologica e garze sterili", "azitromicina collirio x2/die "
                 "per 3 giorni"),
        advice=("lavare le mani dopo l'applicazione", "asciugamani personali", "visita "
                "oculistica se calo della vista o fotofobia"),
        alternatives=("irritazione oculare", "calazio", "corpo estraneo congiuntivale"),
        related=("otitis", "bronchiolitis", "pharyngitis"),
    ),
    _Condition(
        "fever_no_source", (("febbre senza focolaio", "f"),
                            ("febbre senza segni di localizzazione", "f")),
        0.04, (0.7, 0.3, 0.0, 0.0), (1, 10, 36), (), (0.6, 0.25, 0.15), "none", 1.0, 0.0,
        symptoms=("febbre elevata (TC max {tmax} °C)", "iperpiressia", "irritabilità",
                  "ridotta alimentazione", "sonnolenza durante i picchi febbrili",
                  "febbre da {days} giorni ben tollerata"),
        signs=("obiettività negativa", "non esantemi", "faringe lievemente iperemico",
               "buona reattività tra i picchi febbrili"),
        proof=("Esami ematici, stick urine e Rx torace negativi; non identificata la causa.",),
        pending=("In attesa di emocromo, PCR, PCT ed emocoltura.", "Stick urine in corso."),
        negative=(),
        therapy=("paracetamolo {pcm} mg ogni 6 ore se febbre", "ibuprofene {ibu} mg al "
                 "bisogno", "idratazione"),
        advice=("controllo dal PLS entro 24-48 ore", "tornare se febbre oltre 5 giorni, "
                "esantema o peggioramento delle condizioni generali", "misurare la temperatura "
                "3 volte al giorno"),
        alternatives=("virosi aspecifica",),
        related=("uti", "otitis", "febrile_seizure"),
        secondary=False,
    ),
    _Condition(
        "febrile_seizure", (("convulsione febbrile", "f"), ("convulsione febbrile semplice", "f"),
                            ("crisi convulsiva febbrile", "f")),
        0.03, (0.55, 0.15, 0.05, 0.25), (6, 20, 60), (), (0.7, 0.05, 0.25), "neuro", 1.0, 0.0,
        symptoms=("episodio critico con perdita di coscienza e scosse tonico-cloniche "
                  "generalizzate di circa {minutes} minuti in corso di febbre", "revulsione "
                  "oculare e ipertono generalizzato", "sonnolenza dopo l'episodio",
                  "febbre insorta da poche ore", "cianosi periorale durante l'episodio"),
        signs=("non segni di lato", "esame neurologico nella norma", "riflessi osteotendinei "
               "normoevocabili", "pupille isocoriche e isocicliche"),
        proof=("Episodio tipico per età, durata < 15 minuti, non recidiva nelle 24 ore.",
               "Esame neurologico intercritico negativo, EEG non indicato."),
        pending=("Da eseguire EEG.", "Osservazione per 6 ore e rivalutazione neurologica.",
                 "Episodio non osservato direttamente dal personale."),
        negative=("L'episodio descritto è un brivido scuotente, senza perdita di coscienza.",),
        therapy=("paracetamolo {pcm} mg", "ibuprofene {ibu} mg", "microclisma di diazepam da "
                 "usare se crisi oltre 3 minuti"),
        advice=("istruzioni ai genitori per un eventuale nuovo episodio", "l'antipiretico non "
                "previene le ricadute", "controllo neurologico non necessario se episodi "
                "semplici"),
        alternatives=("brivido scuotente", "spasmo affettivo"),
        related=("otitis", "pharyngitis", "uti"),
    ),
)
_BY_KEY = {c.key: c for c in CONDITIONS}

# Status phrasing. {c} condition, {C} capitalised, {x} its gender ending, {ep} age at episode.
_SENTENCE = {
    "confirmed": (
        "Quadro clinico compatibile con {c}.", "Si conferma la diagnosi di {c}.",
        "Il quadro clinico depone per {c}.", "Si pone diagnosi di {c}.", "{C} confermat{x}.",
        "Quadro compatibile con {c} in atto.", "Il quadro è quello di una {c} tipica.",
        "Diagnosi confermata di {c}.", "Il pz presenta {c}.", "Dimess{o} con diagnosi di {c}.",
    ),
    "suspected": (
        "Sospett{x} {c}.", "Probabile {c}.", "Ipotesi diagnostica: {c}, da confermare.",
        "Non si esclude {c}.", "Quadro suggestivo di {c}, diagnosi da confermare.",
        "Sospetto di {c}, in attesa di conferma.", "Verosimile {c}, da rivalutare.",
        "Dubbio di {c}: rivalutare a 24-48 ore.", "Possibile {c} in fase iniziale.",
        "Prima ipotesi {c}, diagnosi differenziale in corso.", "{C}? Da valutare.",
    ),
    "excluded": (
        "Esclus{x} {c}.", "Non segni di {c}.", "Si esclude {c}.",
        "Non elementi suggestivi di {c}.", "{C} esclus{x}.", "Accertamenti negativi per {c}.",
        "Non evidenza di {c}.", "Quadro non compatibile con {c}.", "Ragionevolmente esclus{x} "
        "{c}.", "Non si ritiene presente {c}.",
    ),
    "history": (
        "Pregress{x} {c}.", "In anamnesi {c} a {ep}.", "Episodio di {c} a {ep}.",
        "Riferito ricovero per {c} a {ep}, risolt{x} senza esiti.", "Storia di {c} (a {ep}).",
        "Precedente episodio di {c} a {ep}, guarit{x}.", "Nel {year} {c}, trattat{x} a "
        "domicilio.", "Ha avuto {c} all'età di {ep}.", "Controllo a distanza dopo {c} a {ep}.",
    ),
}
_BARE = {  # what follows a "Diagnosi:" header
    "confirmed": ("{c}", "{c} in atto", "{c} confermat{x}", "{c} (diagnosi clinica)"),
    "suspected": ("sospett{x} {c}", "probabile {c}", "?{c}", "{c}?", "{c} da confermare",
                  "verosimile {c}", "{c} (sospetto)", "sospetto di {c}"),
    "excluded": ("esclus{x} {c}", "{c} esclus{x}", "non {c}"),
}
_LABELLED = ("Diagnosi: {b}.", "Dx: {b}.", "Conclusioni: {b}.", "In conclusione: {b}.",
             "Diagnosi di dimissione: {b}.")
_SECONDARY_ACTIVE = {
    "confirmed": ("Si associa {c}.", "Concomitante {c}.", "Associata {c}.",
                  "All'EO riscontro di {c} associat{x}."),
    "suspected": ("Si associa sospett{x} {c}.", "Non si esclude concomitante {c}.",
                  "Possibile {c} associat{x}, da rivalutare."),
}
_REFERRAL = ("Inviat{o} dal PLS con sospetto di {c}.", "Inviat{o} dal curante per sospett{x} "
             "{c}.", "Il PLS riferisce sospett{x} {c}.", "Giunge con richiesta del PLS: "
             "\"?{c}\".")

_HEADERS = {
    "reason": ("Motivo dell'accesso", "Motivo della visita", "MdA", "Motivo"),
    "history": ("Anamnesi", "Anamnesi patologica prossima", "APP", "Anamnesi e storia clinica"),
    "exam": ("Esame obiettivo", "EO", "E.O.", "Obiettività"),
    "vitals": ("Parametri vitali", "PV", "Parametri", "Parametri all'ingresso"),
    "tests": ("Esami", "Accertamenti", "Esami eseguiti", "Indagini"),
    "course": ("Decorso", "Diario clinico", "Decorso clinico"),
    "diagnosis": ("Diagnosi", "Conclusioni", "Dx", "Conclusione diagnostica"),
    "therapy": ("Terapia", "Tp", "Terapia impostata", "Terapia praticata"),
    "advice": ("Indicazioni", "Si consiglia", "Indicazioni alla dimissione", "Consigli"),
}
_ORDER = ("reason", "history", "exam", "vitals", "tests", "course", "diagnosis", "therapy",
          "advice")

_NORMAL = {
    "resp": ("torace: MV normotrasmesso, non rumori aggiunti", "torace libero",
             "AP: murmure vescicolare fisiologico su tutto l'ambito", "eupnoic{o}, non "
             "rientramenti"),
    "ear": ("MT integre e normoconformate bilateralmente", "otoscopia nella norma",
            "orecchie: MT normali"),
    "throat": ("faringe lievemente iperemico", "faringe roseo, tonsille non ipertrofiche",
               "cavo orale indenne"),
    "abd": ("addome piano, trattabile, non dolente", "addome trattabile, organi ipocondriaci "
            "nei limiti", "peristalsi presente"),
    "skin": ("cute rosea, integra", "non esantemi", "cute e mucose ben idratate"),
    "eye": ("congiuntive rosee", "occhi nella norma"),
    "neuro": ("non segni meningei", "non deficit neurologici focali",
              "fontanella anteriore normotesa"),
    "airway": ("non stridore", "voce normale"),
    "heart": ("az cardiaca ritmica, toni validi, pause libere", "cuore: toni puri, non soffi",
              "polsi periferici validi e simmetrici"),
    "lymph": ("linfonodi laterocervicali non aumentati di volume", "non linfoadenomegalie"),
}
_GENERAL = ("Condizioni generali buone", "CG discrete", "Buone condizioni generali",
            "Vigile, reattiv{o}, ben idratat{o}", "Pz vigile e reattiv{o}", "Colorito roseo",
            "Colorito lievemente pallido", "Sensorio integro", "Condizioni generali discrete, "
            "lievemente sofferente", "Si presenta vigile, collaborante per l'età")
_OTHER_VISITS = (  # unlabelled reason and conclusion of a visit, used when the primary is history
    ("bilancio di salute", "Crescita staturo-ponderale regolare, sviluppo adeguato all'età."),
    ("certificato di idoneità sportiva non agonistica", "Idone{o} all'attività sportiva non "
     "agonistica."),
    ("trauma distorsivo alla caviglia {side}", "Distorsione lieve: ghiaccio, riposo, "
     "rivalutazione se dolore persistente."),
    ("stipsi da alcune settimane", "Stipsi funzionale: dieta ricca di fibre e macrogol."),
    ("rinite da alcuni giorni", "Rinite virale, lavaggi nasali."),
    ("visita di controllo", "Obiettività nella norma."),
    ("dolore addominale ricorrente", "Dolore addominale funzionale, diario alimentare."),
    ("contusione al gomito {side} dopo caduta", "Contusione semplice, non indicazione a Rx."),
    ("vaccinazione programmata", "Nessuna controindicazione alla vaccinazione."),
    ("tosse lieve senza febbre", "IVAS in risoluzione."),
    ("controllo della crescita", "Percentili di peso e altezza stabili."),
)
_GENERIC_ADVICE = ("controllo dal PLS tra 48-72 ore", "tornare in PS in caso di peggioramento",
                   "rivalutazione clinica se febbre persistente", "idratazione adeguata",
                   "antipiretico al bisogno se TC > 38,5 °C", "riposo a domicilio")


@dataclass
class _Mention:
    cond: _Condition
    status: str
    term: str
    ending: str  # "a" | "o": agreement of participles with the term


@dataclass
class _Draft:
    """A note being written: its facts, its style, and its sections as lists of sentences."""

    rng: random.Random
    ctx: dict[str, str]
    age: int
    setting: str
    profile: str  # short | medium | long | very_long
    typo_rate: float
    primary: _Mention
    secondaries: list[_Mention]
    sections: dict[str, list[str]] = field(default_factory=dict)

    def add(self, section: str, sentence: str, *, filler: bool = True) -> None:
        """Append a sentence; filler (not a status cue) may carry typos."""
        text = _cap(_fill(sentence, self.ctx))
        if filler and self.typo_rate:
            text = _typos(text, self.typo_rate, self.rng)
        self.sections.setdefault(section, []).append(text)

    def mention(self, section: str, m: _Mention, pool: Sequence[str]) -> None:
        self.add(section, _mention_text(self.rng.choice(pool), m, self.ctx), filler=False)


def _fill(template: str, ctx: dict[str, str]) -> str:
    return template.format_map(ctx)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mention_text(template: str, m: _Mention, ctx: dict[str, str]) -> str:
    return template.format_map({**ctx, "c": m.term, "C": _cap(m.term), "x": m.ending})


def _typos(text: str, rate: float, rng: random.Random) -> str:
    """Swap, drop or double one letter in a few plain lower-case words."""
    words = text.split(" ")
    for j, word in enumerate(words):
        if len(word) >= 5 and word.isalpha() and word.islower() and rng.random() < rate:
            k = rng.randrange(1, len(word) - 1)
            op = rng.randrange(3)
            if op == 0:
                word = word[:k] + word[k + 1] + word[k] + word[k + 2:]
            elif op == 1:
                word = word[:k] + word[k + 1:]
            else:
                word = word[:k] + word[k] + word[k:]
            words[j] = word
    return " ".join(words)


def _dec(x: float, ctx: dict[str, str], digits: int = 1) -> str:
    return f"{x:.{digits}f}".replace(".", ctx["_sep"])


def _thousands(x: int) -> str:
    return f"{x:,}".replace(",", ".")


_WEIGHT_KG = ((0, 3.4), (2, 5.3), (6, 7.6), (12, 9.4), (24, 12.0), (36, 14.2), (60, 18.3),
              (96, 25.5), (120, 31.5), (144, 38.0), (168, 48.0), (204, 58.0))


def _median_weight(age: int) -> float:
    """Median weight in kg at an age in months, interpolated between growth-chart points."""
    for (a0, w0), (a1, w1) in zip(_WEIGHT_KG, _WEIGHT_KG[1:]):
        if age <= a1:
            return w0 + (w1 - w0) * (age - a0) / (a1 - a0)
    return _WEIGHT_KG[-1][1]


def _dose(kg: float, per_kg: float, cap: float, step: int = 10) -> str:
    return str(int(min(kg * per_kg, cap) // step * step) or step)


def _context(sex: str, age: int, kg: float, rng: random.Random) -> dict[str, str]:
    """Per-note values that phrase templates fill in (doses scale with weight)."""
    ctx = {"_sep": "," if rng.random() < 0.7 else ".", "o": "o" if sex == "M" else "a"}
    ctx.update(
        side=rng.choice(("dx", "sx", "destra", "sinistra")), days=str(rng.randint(1, 5)),
        hours=str(rng.choice((6, 12, 24, 36, 48))), count=str(rng.randint(3, 10)),
        abx=str(rng.choice((5, 7, 10))), kg=_dec(kg, ctx), o2=_dec(rng.choice((0.5, 1, 1.5, 2)),
                                                                    ctx),
        pcm=_dose(kg, 15, 1000), ibu=_dose(kg, 10, 400), amox=_dose(kg, 30, 1000),
        amox50=_dose(kg, 25, 1000), amoxclav=_dose(kg, 40, 875), cefix=_dose(kg, 8, 400),
        ceftr=_dose(kg, 75, 2000, 50), clari=_dose(kg, 7.5, 500), pred=_dose(kg, 1, 40, 1),
        acic=_dose(kg, 20, 800), ml=str(rng.choice((50, 75, 100))),
        betam=_dec(min(kg * 0.1, 4.0), ctx), desa=_dec(min(kg * 0.15, 10.0), ctx),
        ond=_dec(min(kg * 0.15, 4.0), ctx), adr=str(min(5, max(1, round(kg / 4)))),
        puff=str(min(10, 2 + int(kg // 10))), fev1=str(rng.randint(55, 78)),
        scorad=str(rng.randint(15, 60)), ige=str(rng.randint(150, 2400)),
        westley=str(rng.randint(1, 6)), minutes=str(rng.randint(1, 10)),
        tmax=_dec(rng.uniform(38.3, 40.4), ctx),
        gen=rng.choice(("la madre", "il padre", "i genitori", "la nonna", "entrambi i genitori")),
        bimbo=_child_word(sex, age, rng), age=_age_text(age, rng),
    )
    return ctx


def _child_word(sex: str, age: int, rng: random.Random) -> str:
    if age < 12 and rng.random() < 0.6:
        return "lattante"
    if age >= 132 and rng.random() < 0.5:
        return "ragazzo" if sex == "M" else "ragazza"
    return rng.choice(("bambino", "bimbo", "pz")) if sex == "M" else rng.choice(
        ("bambina", "bimba", "pz"))


def _age_text(months: int, rng: random.Random) -> str:
    if months < 24:
        return f"{months} {'mese' if months == 1 else 'mesi'}"
    years, rest = divmod(months, 12)
    if rest and years < 6 and rng.random() < 0.6:
        return f"{years} anni e {rest} {'mese' if rest == 1 else 'mesi'}"
    return f"{years} anni"


def _largest_remainder(n: int) -> list[tuple[_Condition, str]]:
    """Primary (condition, status) cells with counts proportional to weight × P(status)."""
    cells = [(c, s, n * c.weight * p) for c in CONDITIONS for s, p in zip(STATUSES, c.statuses)
             if p > 0]
    counts = [int(share) for _, _, share in cells]
    by_remainder = sorted(range(len(cells)), key=lambda j: (counts[j] - cells[j][2], j))
    for j in by_remainder[: n - sum(counts)]:
        counts[j] += 1
    return [(c, s) for (c, s, _), k in zip(cells, counts) for _ in range(k)]


def _age(cond: _Condition, status: str, rng: random.Random) -> int:
    lo, mode, hi = cond.ages
    if status == "history":  # the episode lies in the past: the child is older now
        return rng.randint(max(lo + 4, 6), min(hi + 72, 204))
    return max(lo, min(hi, round(rng.triangular(lo, hi, mode))))


def _episode_age(cond: _Condition, age: int, rng: random.Random) -> int:
    lo, mode, hi = cond.ages
    return max(lo, min(hi, age - 2, round(rng.triangular(lo, hi, mode))))


def _visit_date(cond: _Condition, rng: random.Random) -> tuple[int, str]:
    year = rng.randint(2019, 2024)
    month = rng.choice(cond.season) if cond.season and rng.random() < 0.75 else rng.randint(1, 12)
    day = rng.randint(1, calendar.monthrange(year, month)[1])
    return year, f"{year:04d}-{month:02d}-{day:02d}"


def _make_mention(cond: _Condition, status: str, rng: random.Random) -> _Mention:
    term, gender = rng.choice(cond.terms)
    return _Mention(cond, status, term, "a" if gender == "f" else "o")


def _secondaries(primary: _Condition, age: int, rng: random.Random) -> list[_Mention]:
    """About 30% of notes mention other conditions, mostly excluded or past history."""
    count = 0 if rng.random() < 0.70 else (1 if rng.random() < 0.85 else 2)
    chosen: list[_Mention] = []
    for _ in range(count):
        status = rng.choices(STATUSES, weights=(0.12, 0.08, 0.45, 0.35))[0]
        taken = {primary.key} | {m.cond.key for m in chosen}
        eligible = [c for c in CONDITIONS if c.secondary and c.key not in taken
                    and _fits(c, status, age)]
        related = [c for c in eligible if c.key in primary.related]
        pool = related if related and rng.random() < 0.7 else eligible
        if pool:
            chosen.append(_make_mention(rng.choice(pool), status, rng))
    return chosen


def _fits(cond: _Condition, status: str, age: int) -> bool:
    lo, _, hi = cond.ages
    if status == "history":
        return age >= lo + 4
    return lo <= age <= hi and cond.statuses[STATUSES.index(status)] > 0


def _active(draft: _Draft) -> list[_Mention]:
    """Mentions the child has now (confirmed or suspected), primary first."""
    return [m for m in [draft.primary, *draft.secondaries] if m.status in ("confirmed",
                                                                          "suspected")]


def _pick(rng: random.Random, pool: Sequence[str], k: int) -> list[str]:
    return rng.sample(list(pool), min(k, len(pool)))
