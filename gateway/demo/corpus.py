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
import functools
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
    """One synthetic visit note and its labels."""

    id: str  # "PED-000123"
    text: str  # the visit note, in Italian
    labels: list[str]  # "condition:status" per condition mentioned, the primary first
    condition: str  # primary condition, e.g. "bronchiolitis"
    status: str  # primary status: confirmed | suspected | excluded | history
    age_months: int
    sex: str  # "M" | "F"
    visit_date: str  # ISO date
    setting: str  # "pronto soccorso" | "ambulatorio" | "reparto"


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
    system: str  # organ systems (space-separated) whose normal findings its signs replace
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
    prodrome: tuple[str, ...] = ()  # symptoms for a day-by-day history; () means `symptoms`
    onset: tuple[str, ...] = ()  # when the complaint began; () means the usual durations


_WINTER = (11, 12, 1, 2, 3)

CONDITIONS: tuple[_Condition, ...] = (
    _Condition(
        "bronchiolitis", (("bronchiolite", "f"), ("bronchiolite acuta", "f")),
        0.22, (0.40, 0.40, 0.12, 0.08), (1, 4, 23), _WINTER, (0.5, 0.2, 0.3), "resp", 0.45, 0.7,
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
        "abd hydration", 0.4, 0.0,
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
        "throat lymph", 0.85, 0.0,
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
        0.06, (0.45, 0.25, 0.17, 0.13), (1, 12, 144), (), (0.5, 0.25, 0.25), "urine abd", 0.85, 0.0,
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
    ),
    _Condition(
        "varicella", (("varicella", "f"),),
        0.04, (0.45, 0.25, 0.17, 0.13), (12, 48, 120), (2, 3, 4, 5, 6), (0.2, 0.75, 0.05),
        "skin throat", 0.5, 0.0,
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
        0.04, (0.7, 0.3, 0.0, 0.0), (1, 10, 36), (), (0.6, 0.25, 0.15), "throat skin", 1.0, 0.0,
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
                  "generalizzate di circa {minutes} minuti", "revulsione oculare e ipertono "
                  "generalizzato", "sonnolenza post-critica", "cianosi periorale",
                  "febbre elevata", "scosse ritmiche ai quattro arti"),
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
        prodrome=("febbre", "febbre elevata", "rinorrea", "tosse", "inappetenza",
                  "irritabilità"),
        onset=("poco prima dell'arrivo", "circa un'ora fa", "al domicilio", "durante il sonno",
               "in corso di febbre", ""),
    ),
)

# Status phrasing. {c} condition, {C} capitalised, {x} its gender ending, {ep} age at episode.
_SENTENCE = {
    "confirmed": (
        "Quadro clinico compatibile con {c}.", "Si conferma la diagnosi di {c}.",
        "Il quadro clinico depone per {c}.", "Si pone diagnosi di {c}.", "{C} confermat{x}.",
        "Quadro compatibile con {c} in atto.", "Quadro tipico di {c}.",
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
        "domicilio.", "Ha avuto {c} all'età di {ep}.",
        "Vist{o} in passato per {c} a {ep}, risolt{x}.",
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
                  "Concomitante quadro di {c}."),
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
    "skin": ("cute rosea, integra", "non esantemi", "cute indenne"),
    "hydration": ("cute e mucose ben idratate", "mucose umide", "ben idratat{o}"),
    "eye": ("congiuntive rosee", "occhi nella norma"),
    "neuro": ("non segni meningei", "non deficit neurologici focali",
              "fontanella anteriore normotesa"),
    "airway": ("non stridore", "voce normale"),
    "heart": ("az cardiaca ritmica, toni validi, pause libere", "cuore: toni puri, non soffi",
              "polsi periferici validi e simmetrici"),
    "lymph": ("linfonodi laterocervicali non aumentati di volume", "non linfoadenomegalie"),
}
_GENERAL = ("Condizioni generali buone", "Buone condizioni generali", "Vigile, reattiv{o}",
            "Pz vigile e reattiv{o}", "Colorito roseo", "Si presenta vigile, collaborante per "
            "l'età", "Sensorio integro", "CG discrete", "Colorito lievemente pallido",
            "Condizioni generali discrete, lievemente sofferente")
_WELL = 7  # the first _WELL general impressions suit a child who is well
# Unlabelled visits for notes whose primary is past history: (reason, conclusion, urgent).
_OTHER_VISITS = (
    ("bilancio di salute", "Crescita staturo-ponderale regolare, sviluppo adeguato all'età.",
     False),
    ("certificato di idoneità sportiva non agonistica", "Idone{o} all'attività sportiva non "
     "agonistica.", False),
    ("trauma distorsivo alla caviglia {side}", "Distorsione lieve: ghiaccio, riposo, "
     "rivalutazione se dolore persistente.", True),
    ("stipsi da alcune settimane", "Stipsi funzionale: dieta ricca di fibre e macrogol.", False),
    ("rinite da alcuni giorni", "Rinite virale, lavaggi nasali.", False),
    ("visita di controllo", "Obiettività nella norma.", False),
    ("dolore addominale ricorrente", "Dolore addominale funzionale, diario alimentare.", True),
    ("contusione al gomito {side} dopo caduta", "Contusione semplice, non indicazione a Rx.",
     True),
    ("vaccinazione programmata", "Nessuna controindicazione alla vaccinazione.", False),
    ("tosse lieve senza febbre", "IVAS in risoluzione.", False),
    ("controllo della crescita", "Percentili di peso e altezza stabili.", False),
    ("puntura d'insetto al braccio {side}", "Reazione locale, impacchi freddi.", True),
    ("ferita lacero-contusa al sopracciglio", "Ferita chiusa con colla tissutale.", True),
    ("trauma cranico minore senza perdita di coscienza", "Trauma cranico minore: osservazione "
     "a domicilio per 24 ore.", True),
    ("russamento notturno", "Sospetta ipertrofia adenoidea, visita ORL.", False),
    ("cefalea occasionale", "Cefalea di tipo tensivo, diario della cefalea.", False),
)
_REASON_OTHER = ("Visita per {sx}.", "Si presenta per {sx}.", "Condott{o} {gen_da} per {sx}.",
                 "{bimbo} di {age}, visitat{o} per {sx}.", "{sx}.")
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
    style: str  # headed | inline | narrative
    typo_rate: float
    primary: _Mention
    secondaries: list[_Mention]
    sections: dict[str, list[str]] = field(default_factory=dict)
    words: int = 0  # running word count of the sections

    def add(self, section: str, sentence: str, *, filler: bool = True) -> None:
        """Append a sentence; filler (not a status cue) may carry typos."""
        text = _cap(_fill(sentence, self.ctx))
        if filler and self.typo_rate:
            text = _typos(text, self.typo_rate, self.rng)
        self.sections.setdefault(section, []).append(text)
        self.words += text.count(" ") + 1

    def pick(self, pool: Sequence[str], k: int) -> list[str]:
        """Up to k distinct phrases from the pool that suit the child's age."""
        fitting = _fitting(tuple(pool), self.age)
        return self.rng.sample(fitting, min(k, len(fitting)))

    def mention(self, section: str, m: _Mention, pool: Sequence[str]) -> None:
        ctx = {**self.ctx, **_episode_ctx(self, m)} if m.status == "history" else self.ctx
        self.add(section, _mention_text(self.rng.choice(pool), m, ctx), filler=False)


_AGE_BOUND_WORDS = (("poppat", 0, 18), ("nido", 0, 36), ("pannolin", 0, 36),
                    ("scuola dell'infanzia", 30, 72), ("fontanella", 0, 18), ("lattante", 0, 12),
                    ("scuola", 36, 999), ("sport", 60, 999), ("cefalea", 36, 999),
                    ("russamento", 24, 999), ("ricorrente", 36, 999))


@functools.lru_cache(maxsize=4096)
def _age_bounds(text: str) -> tuple[int, int]:
    """Ages in months [lo, hi) at which a phrase makes sense ("poppate" only for infants)."""
    bounds = [(lo, hi) for word, lo, hi in _AGE_BOUND_WORDS if word in text]
    return max((lo for lo, _ in bounds), default=0), min((hi for _, hi in bounds), default=999)


def _suits_age(text: str, age: int) -> bool:
    lo, hi = _age_bounds(text)
    return lo <= age < hi


@functools.lru_cache(maxsize=16384)
def _fitting(pool: tuple[str, ...], age: int) -> tuple[str, ...]:
    return tuple(t for t in pool if _suits_age(t, age))


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
        side=rng.choice(("dx", "sx")), days=str(rng.randint(2, 5)),
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
        gen=rng.choice(("la madre", "il padre", "la mamma", "la nonna", "il papà")),
        gen_da=rng.choice(("dalla madre", "dal padre", "dai genitori", "dalla nonna")),
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


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " e " + items[-1]


_DURATION = ("da {days} giorni", "da ieri", "dalla notte", "da circa {hours} ore",
             "da {days} gg", "con esordio {days} giorni fa", "")
_REASON = {
    "pronto soccorso": ("Giunge in PS per {sx} {dur}.", "Accede in PS con {gen} "
                        "per {sx} {dur}.", "Accesso in PS per {sx}.", "Triage: codice {code}. "
                        "{sx} {dur}.", "{bimbo} di {age} condott{o} in PS per {sx} {dur}."),
    "ambulatorio": ("Visita ambulatoriale per {sx} {dur}.", "Condott{o} in ambulatorio {gen_da} "
                    "per {sx}.", "{gen} riferisce {sx} {dur}.", "{bimbo} di {age}, visitat{o} "
                    "per {sx} {dur}."),
    "reparto": ("Ricoverat{o} per {sx} {dur}.", "Giunge in reparto dal PS per {sx}.",
                "Trasferit{o} dal PS per {sx} e necessità di monitoraggio.", "{bimbo} di {age} "
                "ricoverat{o} per {sx} {dur}."),
}
_INTRO = ("{bimbo} di {age}.", "Età: {age}.", "{bimbo}, {age}.", "Pz di {age}.")


def _reason(d: _Draft) -> None:
    rng, p = d.rng, d.primary
    if p.status == "history":
        sx = d.ctx["other_reason"]
    else:
        sx = _join(d.pick(p.cond.symptoms, rng.choice((1, 2, 2, 3))))
    if p.status == "history":
        templates = _REASON_OTHER + (_REASON[d.setting][:1] if d.setting != "ambulatorio" else ())
    else:
        templates = _REASON[d.setting] + ("{sx} {dur}.",)
    template = rng.choice(templates)
    onset = p.cond.onset or _DURATION
    dur = _fill(rng.choice(onset), d.ctx) if p.status != "history" else ""
    code = rng.choice(("verde", "verde", "giallo", "bianco", "azzurro"))
    sentence = template.format_map({**d.ctx, "sx": sx, "dur": dur, "code": code})
    sentence = sentence.replace(" .", ".").replace("  ", " ").replace(". " + sx, ". " + _cap(sx))
    if "{age}" not in template and rng.random() < 0.4:
        d.add("reason", rng.choice(_INTRO))
    d.add("reason", sentence)
    if p.status != "history" and rng.random() < 0.25:
        d.mention("reason", p, _REFERRAL)


_TIMELINE = ("Da {days} giorni {s1}, successivamente {s2}.", "Esordio con {s1}, poi {s2}.",
             "Ieri comparsa di {s1}.", "Nella notte peggioramento con {s1}.",
             "{gen} riferisce {s1} da alcuni giorni.", "Da {days} gg {s1} ingravescente.",
             "{s1} da {days} giorni, con {s2}.")
_HOME = ("Febbre max {tmax} °C.", "Non febbre.", "Alimentazione ridotta (circa metà dei pasti).",
         "Alimentazione conservata.", "Diuresi conservata.", "Diuresi ridotta ({count} pannolini "
         "nelle ultime 24 ore).", "A domicilio paracetamolo con parziale beneficio.",
         "Già in terapia con lavaggi nasali.", "Frequenta il nido.", "Frequenta la scuola "
         "dell'infanzia.", "Fratello con sintomi simili.", "Contatti con familiari con sintomi "
         "respiratori.", "Non viaggi recenti.", "Alvo regolare.", "Sonno disturbato.",
         "Nessun farmaco assunto prima dell'accesso.")
_ROUTINE = ("Alimentazione conservata.", "Diuresi conservata.", "Alvo regolare.",
            "Non viaggi recenti.", "Frequenta il nido.", "Frequenta la scuola dell'infanzia.",
            "Frequenta la scuola.", "Non fumatori in casa.", "Vaccinazioni in regola.")
_REMOTE = ("APR: negativa.", "APR: muta.", "APR: nulla di rilevante.", "Anamnesi patologica "
           "remota negativa.", "Non patologie di rilievo in anamnesi.")
_REMOTE_EXTRA = ("Ricovero neonatale per ittero trattato con fototerapia.", "Frequenti IVAS nel "
                 "periodo invernale.", "Intervento di adenoidectomia.", "Frattura "
                 "dell'avambraccio trattata con gesso.", "Reflusso gastroesofageo nei primi mesi, "
                 "risolto.")
_FAMILY = ("AF: negativa.", "AF: madre con rinite allergica.", "AF: padre con allergia ai "
           "pollini.", "Familiarità per atopia.", "Genitori sani, non consanguinei.",
           "Fumo passivo: padre fumatore.", "Non fumatori in casa.", "Un fratello maggiore sano.",
           "Nonno materno diabetico.")
_ALLERGY = ("Allergie: nessuna nota.", "Non allergie note.", "Nega allergie a farmaci.")


def _history(d: _Draft) -> None:
    rng, p, depth = d.rng, d.primary, _DEPTH[d.profile]
    if p.status != "history" and rng.random() < 0.35 + 0.3 * depth:
        for template in d.pick(_TIMELINE, 1 + (depth >= 2)):
            s1, s2 = d.pick(p.cond.prodrome or p.cond.symptoms, 2)
            d.add("history", template.replace("{s1}", s1).replace("{s2}", s2))
        for template in d.pick(_HOME, rng.randint(0, depth + 1)):
            d.add("history", template)
    if depth >= 2 and rng.random() < 0.7:
        _physiological(d)
    if depth >= 2 and rng.random() < 0.6:
        for template in d.pick(_FAMILY, rng.randint(1, 2)):
            d.add("history", template)
    past = [m for m in [p, *d.secondaries] if m.status == "history"]
    rng.shuffle(past)
    for m, template in zip(past, rng.sample(_SENTENCE["history"], len(past))):
        d.mention("history", m, (template,))
    if not past and rng.random() < 0.2 + 0.25 * depth:
        d.add("history", rng.choice(_REMOTE))
    if depth >= 2 and rng.random() < 0.3:
        d.add("history", rng.choice(_REMOTE_EXTRA))
    if depth >= 1 and rng.random() < 0.35:
        d.add("history", rng.choice(_ALLERGY))


def _physiological(d: _Draft) -> None:
    rng = d.rng
    sentences = [
        f"Nat{{o}} a termine (EG {rng.randint(37, 41)} sett.) da parto "
        f"{rng.choice(('eutocico', 'cesareo', 'spontaneo', 'cesareo elettivo'))}, "
        f"PN {rng.randint(2600, 4200)} g.",
        rng.choice(("Periodo neonatale regolare.", "Periodo perinatale nella norma.",
                    "Apgar 9/10.")),
        f"Allattamento {rng.choice(('materno esclusivo', 'artificiale', 'misto'))}.",
        rng.choice(("Vaccinazioni in regola.", "Vaccinazioni eseguite secondo calendario.",
                    "Vaccinazioni in corso secondo calendario.")),
        rng.choice(("Sviluppo psicomotorio regolare.", "Tappe dello sviluppo nella norma.")),
        f"Accrescimento regolare lungo il {rng.choice((10, 25, 50, 75, 90))}° percentile.",
    ]
    if d.age > 8:
        sentences.append(f"Svezzamento iniziato a {rng.randint(4, 7)} mesi.")
    for sentence in d.pick(sentences, rng.randint(2, len(sentences))):
        d.add("history", sentence)


_DEPTH = {"short": 0, "medium": 1, "long": 2, "very_long": 3}


def _exam(d: _Draft) -> None:
    rng, depth = d.rng, _DEPTH[d.profile]
    findings: list[str] = []
    owned = {s for m in _active(d) for s in m.cond.system.split()}
    if d.primary.status in ("confirmed", "suspected"):
        findings += d.pick(d.primary.cond.signs, rng.randint(1, 2) + min(depth, 2))
    for m in d.secondaries:
        if m.status == "confirmed" or (m.status == "suspected" and rng.random() < 0.5):
            findings += d.pick(m.cond.signs, 1)
    systems = [s for s in _NORMAL if s not in owned]
    for system in d.pick(systems, rng.randint(1, 2) + depth):
        normal = [f for f in _NORMAL[system] if d.age < 18 or "fontanella" not in f]
        findings.append(rng.choice(normal))
    rng.shuffle(findings)
    unwell = _active(d) or d.primary.status == "excluded"
    d.add("exam", rng.choice(_GENERAL if unwell else _GENERAL[:_WELL]) + ".")
    while findings:
        k = rng.randint(1, 3)
        d.add("exam", ", ".join(findings[:k]) + ".")
        findings = findings[k:]


def _vital_signs(d: _Draft, fever: float, distress: float) -> list[str]:
    rng, age = d.rng, d.age
    hr0, rr0 = ((130, 38) if age < 12 else (115, 30) if age < 36 else (100, 24) if age < 96
                else (88, 19))
    febrile = rng.random() < fever
    tc = rng.uniform(38.0, 40.2) if febrile else rng.uniform(36.1, 37.4)
    hr = round(hr0 + rng.gauss(0, 8) + max(0.0, tc - 37.0) * 10 + distress * rng.uniform(0, 25))
    rr = round(rr0 + rng.gauss(0, 3) + distress * rng.uniform(4, 22))
    spo2 = max(86, min(100, 100 - rng.randint(0, 3) - round(distress * rng.uniform(0, 8))))
    kg = d.ctx["kg"]
    items = [
        (0.9, rng.choice(("FC {} bpm", "FC {}/min", "FC: {}", "FC {}")).format(hr)),
        (0.8, rng.choice(("FR {} atti/min", "FR {}/min", "FR: {}", "FR {} apm")).format(rr)),
        (0.85, rng.choice(("SpO2 {}% in aa", "SpO2 {}% in a.a.", "Sat O2 {}%",
                           "SatO2 {}% in aria ambiente", "SpO2: {}%")).format(spo2)),
        (0.85, rng.choice(("TC {} °C", "TC {}°", "T {} °C", "TC ascellare {} °C",
                           "temp. {} °C")).format(_dec(tc, d.ctx))),
        (0.6, rng.choice(("peso {} kg", "P {} kg", "peso: {} kg")).format(kg)),
        (0.3 if age >= 36 else 0.0, f"PA {rng.randint(90, 120)}/{rng.randint(50, 75)} mmHg"),
        (0.2, rng.choice(("refill < 2 sec", "CRT < 2\""))),
    ]
    chosen = [text for p, text in items if rng.random() < p]
    if rng.random() < 0.2:
        rng.shuffle(chosen)
    return chosen or [f"SpO2 {spo2}% in aa"]


def _vitals(d: _Draft) -> None:
    p = d.primary
    active = _active(d)
    fever = max([m.cond.fever for m in active], default=0.1)
    distress = max([m.cond.distress for m in active], default=0.0)
    if p.status == "excluded":
        fever, distress = max(fever, p.cond.fever * 0.5), max(distress, 0.1)
    sep = d.rng.choice((", ", " - ", "; ", ", ", "  "))
    d.add("vitals", sep.join(_vital_signs(d, fever, distress)).rstrip(".") + ".", filler=False)


_LABS = ("Emocromo: GB {gb}/mmc, N {neu}%, Hb {hb} g/dl, PLT {plt}.000/mmc.", "PCR {pcr} mg/dl.",
         "PCT {pct} ng/ml.", "Glicemia {glu} mg/dl.", "Elettroliti nella norma.",
         "Emocromo e PCR nei limiti.", "Funzionalità renale nella norma.")


def _labs(d: _Draft) -> dict[str, str]:
    rng, ctx = d.rng, d.ctx
    bacterial = any(m.cond.key in ("pneumonia", "uti", "pharyngitis") for m in _active(d))
    pcr = rng.uniform(1.5, 18.0) if bacterial else rng.uniform(0.1, 2.5)
    return {"gb": _thousands(rng.randint(60, 250) * 100), "neu": str(rng.randint(30, 85)),
            "hb": _dec(rng.uniform(10.5, 13.8), ctx), "plt": str(rng.randint(180, 520)),
            "pcr": _dec(pcr, ctx, 2 if pcr < 1 else 1),
            "pct": _dec(rng.uniform(0.05, 3.0 if bacterial else 0.4), ctx, 2),
            "glu": str(rng.randint(70, 110))}


def _tests(d: _Draft) -> None:
    rng, p, depth = d.rng, d.primary, _DEPTH[d.profile]
    pool = {"confirmed": p.cond.proof, "suspected": p.cond.pending,
            "excluded": p.cond.negative}.get(p.status, ())
    chance = 0.85 if p.status == "excluded" else 0.3 + 0.15 * depth
    if pool and rng.random() < chance:
        d.add("tests", rng.choice(pool), filler=False)
    for m in d.secondaries:
        if m.status == "confirmed" and m.cond.proof and rng.random() < 0.4:
            d.add("tests", rng.choice(m.cond.proof), filler=False)
    if rng.random() < 0.1 + 0.2 * depth:
        labs = _labs(d)
        for template in d.pick(_LABS, rng.randint(1, 3)):
            d.add("tests", template.format_map(labs), filler=False)


_DAY = ("In {k}a giornata", "G{k}", "{k}° giorno di ricovero", "Giornata {k}", "Giorno {k}")
_WARD = ("alimentazione in ripresa", "apiretic{o} da 24 ore", "diuresi valida",
         "notte tranquilla", "parametri stabili", "proseguita la terapia in atto",
         "genitori informati sull'andamento clinico", "picco febbrile trattato con paracetamolo",
         "peso stabile", "buona tolleranza dell'alimentazione per os", "lieve peggioramento nel "
         "pomeriggio, poi stabile", "rimosso accesso venoso", "condizioni generali buone",
         "sonno regolare", "colorito roseo", "obiettività invariata", "alvo regolare",
         "buona reattività", "sospesa idratazione ev", "giro visita senza novità")
_WARD_RESP = ("progressivo miglioramento della dinamica respiratoria", "sospesa O2 terapia",
              "eseguiti lavaggi nasali e aspirazione", "riduzione del fabbisogno di ossigeno",
              "SpO2 stabile in aria ambiente durante il sonno", "tosse in riduzione")
_WARD_OWN = ("persiste {symptom}", "{sign} in riduzione", "proseguita {therapy}",
             "ancora presente {symptom}", "non più {sign}")
_HOME_DAY = ("Il giorno {k}", "In {k}a giornata di malattia", "Al {k}° giorno", "Nella {k}a "
             "giornata")
_HOME_EVENT = ("comparsa di {s}", "persistenza di {s}", "peggioramento di {s}",
               "lieve miglioramento di {s}", "{s} soprattutto la notte")
_HOME_EXTRA = ("febbre max {tmax} °C", "somministrato paracetamolo con beneficio",
               "contattato telefonicamente il PLS", "visitat{o} dal PLS che ha consigliato "
               "osservazione", "alimentazione ridotta", "sonno disturbato", "diuresi conservata",
               "alvo regolare", "nessun contatto noto con malati", "il fratello maggiore aveva "
               "sintomi simili", "assunto ibuprofene una volta", "non vomito", "buona "
               "reattività tra gli episodi", "{gen} riferisce pianto frequente",
               "assunte circa metà delle poppate", "rientro anticipato dal nido")


def _ward_events(d: _Draft, k: int) -> list[str]:
    rng, cond = d.rng, d.primary.cond
    pool = list(_WARD)
    if "resp" in cond.system or "airway" in cond.system:
        pool += _WARD_RESP
    if d.setting != "reparto":  # hours in PS or a check-up, not a night on the ward
        pool = [e for e in pool if not any(w in e for w in ("notte", "sonno", "giro", "24 ore"))]
    events = d.pick(pool, rng.randint(1, 3 if k > 1 else 2))
    if d.primary.status in ("confirmed", "suspected") and rng.random() < 0.7:
        own = rng.choice(_WARD_OWN).format(symptom=rng.choice(cond.symptoms),
                                           sign=rng.choice(cond.signs),
                                           therapy=rng.choice(cond.therapy))
        events.insert(rng.randint(0, len(events)), own)
    return events


def _ward_day(d: _Draft, k: int) -> None:
    rng = d.rng
    signs = _vital_signs(d, 0.2, 0.2)
    vitals = rng.sample(signs, min(2, len(signs)))
    if d.setting == "reparto":
        label = rng.choice(_DAY).format(k=k)
    elif d.setting == "pronto soccorso":
        label = f"Rivalutazione dopo {k * 2} ore"
    else:
        label = f"Controllo a {k * 2} giorni"
    measured = ", ".join(vitals).rstrip(".")
    d.add("course", f"{label}: {', '.join(_ward_events(d, k))}; {measured}.")


def _home_days(d: _Draft, days: int) -> list[str]:
    rng, lines = d.rng, []
    for k in range(1, days + 1):
        cond = d.primary.cond
        event = rng.choice(_HOME_EVENT).replace("{s}", rng.choice(cond.prodrome or cond.symptoms))
        extra = ", ".join(d.pick(_HOME_EXTRA, rng.randint(1, 3)))
        lines.append(f"{rng.choice(_HOME_DAY).format(k=k)} {event}; {extra}.")
    return lines


def _course(d: _Draft) -> None:
    rng, depth = d.rng, _DEPTH[d.profile]
    if d.setting == "reparto" and rng.random() < 0.3 * depth:
        for k in range(1, rng.randint(2, 4)):
            _ward_day(d, k)
    elif d.setting == "pronto soccorso" and rng.random() < 0.1 + 0.1 * depth:
        _ward_day(d, 1)


_ALTERNATIVE = ("Quadro di {alt}.", "Diagnosi finale: {alt}.", "Si tratta di {alt}.",
                "Conclusione: {alt}.", "Il quadro è riferibile a {alt}.")


def _primary_diagnosis(d: _Draft) -> None:
    rng, p = d.rng, d.primary
    if p.status == "history":
        d.add("diagnosis", d.ctx["other_conclusion"])
        return
    if rng.random() < 0.5 and p.status in _BARE:
        bare = _mention_text(rng.choice(_BARE[p.status]), p, d.ctx)
        labelled = [t for t in _LABELLED if "dimissione" not in t or d.setting == "reparto"]
        template = "{b}." if d.style != "narrative" else rng.choice(labelled)
        d.add("diagnosis", template.replace("{b}", bare).replace("?.", "?"), filler=False)
    else:
        d.mention("diagnosis", p, _SENTENCE[p.status])
    if p.status == "excluded" and not any(m.status == "confirmed" for m in d.secondaries):
        alt = rng.choice(p.cond.alternatives)
        d.add("diagnosis", rng.choice(_ALTERNATIVE).replace("{alt}", alt))


def _diagnosis(d: _Draft) -> None:
    rng = d.rng
    _primary_diagnosis(d)
    for m in d.secondaries:
        if m.status in _SECONDARY_ACTIVE:
            d.mention("diagnosis", m, _SECONDARY_ACTIVE[m.status] + _SENTENCE[m.status])
        elif m.status == "excluded":
            where = rng.choice(("diagnosis", "diagnosis", "tests", "exam"))
            if m.cond.negative and rng.random() < 0.5:
                d.add(where, rng.choice(m.cond.negative), filler=False)
            d.mention(where, m, _SENTENCE["excluded"])


_SYMPTOMATIC = ("paracetamolo {pcm} mg al bisogno", "lavaggi nasali con soluzione fisiologica",
                "ibuprofene {ibu} mg al bisogno")
_THERAPY = ("Si imposta terapia con {list}.", "{list}.", "Terapia domiciliare: {list}.",
            "Prescrizione: {list}.", "Praticati: {list}.", "In PS: {list}.")


def _therapy(d: _Draft) -> None:
    rng, p, depth = d.rng, d.primary, _DEPTH[d.profile]
    items: list[str] = []
    if p.status in ("confirmed", "suspected"):
        items += d.pick(p.cond.therapy, rng.randint(1, 2) + (depth >= 2))
    elif p.status == "excluded" and rng.random() < 0.7:
        items += d.pick(_SYMPTOMATIC, 1)
    for m in d.secondaries:
        if m.status == "confirmed":
            items += d.pick(m.cond.therapy, 1)
    if not items:
        if p.status == "excluded":
            d.add("therapy", rng.choice(("Nessuna terapia specifica.", "Non necessaria terapia.",
                                         "Solo terapia sintomatica al bisogno.")))
        return
    templates = [t for t in _THERAPY if ("PS" not in t or d.setting == "pronto soccorso")
                 and (":" not in t or d.style == "narrative")]
    if d.style != "narrative" and rng.random() < 0.3:
        for item in items:
            d.add("therapy", f"- {item}")
    else:
        d.add("therapy", rng.choice(templates).replace("{list}", "; ".join(items)))


def _advice(d: _Draft) -> None:
    rng, p, depth = d.rng, d.primary, _DEPTH[d.profile]
    if p.status == "history" or rng.random() > 0.35 + 0.25 * depth:
        return
    own = d.pick(p.cond.advice, rng.randint(1, 1 + depth)) if p.status != "excluded" else []
    items = own + d.pick(_GENERIC_ADVICE, rng.randint(0 if own else 1, 1 if own else 2))
    if d.style != "narrative" and rng.random() < 0.4:
        for item in items:
            d.add("advice", f"- {item}")
    else:
        leads = ("Si consiglia: {}.", "Indicazioni: {}.", "Si raccomanda: {}.")
        lead = rng.choice(leads) if d.style == "narrative" else "{}."
        d.add("advice", lead.format("; ".join(items)))


def _render(d: _Draft) -> str:
    """Lay the sections out in the note's style: headed blocks, inline headers, or prose."""
    rng = d.rng
    order = list(_ORDER)
    if rng.random() < 0.4:  # vitals are often written before the examination
        order[2], order[3] = order[3], order[2]
    if rng.random() < 0.15:
        order[-2], order[-1] = order[-1], order[-2]
    present = [(key, d.sections[key]) for key in order if d.sections.get(key)]
    if d.style == "narrative":
        return _render_prose(d, present)
    upper = rng.random() < 0.4
    blocks = []
    for key, sentences in present:
        header = rng.choice(_HEADERS[key])
        header = header.upper() if upper else header
        lines = any(s.startswith("- ") for s in sentences)
        body = "\n".join(sentences) if lines else " ".join(sentences).replace(" \n", "\n")
        if d.style == "headed":
            blocks.append(f"{header}:\n{body}" if rng.random() < 0.7 else f"{header}\n{body}")
        else:
            blocks.append(f"{header}:{chr(10) if lines else ' '}{body}")
    return ("\n\n" if d.style == "headed" else "\n").join(blocks)


def _render_prose(d: _Draft, present: list[tuple[str, list[str]]]) -> str:
    paragraphs: list[list[str]] = [[]]
    for key, sentences in present:
        if key in ("exam", "course", "diagnosis") and paragraphs[-1]:
            paragraphs.append([])
        if key == "vitals" and d.rng.random() < 0.5:
            sentences = [f"Parametri: {sentences[0]}"] + sentences[1:]
        if key == "exam" and d.rng.random() < 0.4:
            sentences = [f"All'EO: {sentences[0][:1].lower()}{sentences[0][1:]}"] + sentences[1:]
        paragraphs[-1].extend(s.removeprefix("- ") for s in sentences)
    return "\n".join(" ".join(p) for p in paragraphs if p)


_PROFILES = ("short", "medium", "long", "very_long")
_STYLES = {"short": (0.0, 0.6, 0.4), "medium": (0.35, 0.4, 0.25), "long": (0.55, 0.35, 0.1),
           "very_long": (0.6, 0.35, 0.05)}


def _draft(cond: _Condition, status: str, rng: random.Random) -> _Draft:
    sex = rng.choice("MF")
    age = _age(cond, status, rng)
    year, visit_date = _visit_date(cond, rng)
    profile = rng.choices(_PROFILES, weights=(0.22, 0.5, 0.23, 0.05))[0]
    weights = (0.15, 0.8, 0.05) if status == "history" else cond.settings
    setting = rng.choices(SETTINGS, weights=weights)[0]
    if profile == "very_long" and status == "history":  # a routine visit stays short
        profile = "long"
    if profile == "very_long" and rng.random() < 0.6:  # long notes are mostly ward notes
        setting = "reparto"
    kg = _median_weight(age) * rng.uniform(0.85, 1.15)
    ctx = _context(sex, age, kg, rng)
    visits = [v for v in _OTHER_VISITS if _suits_age(v[0], age)]
    other_reason, other_conclusion, urgent = rng.choice(visits)
    if status == "history" and not urgent:
        setting = "ambulatorio"
    ctx.update(year=str(year), date=visit_date, other_reason=_fill(other_reason, ctx),
               other_conclusion=_fill(other_conclusion, ctx))
    style = rng.choices(("headed", "inline", "narrative"), weights=_STYLES[profile])[0]
    typo_rate = 0.0 if rng.random() < 0.4 else rng.uniform(0.005, 0.03)
    primary = _make_mention(cond, status, rng)
    return _Draft(rng, ctx, age, setting, profile, style, typo_rate, primary,
                  _secondaries(cond, age, rng))


def _write(d: _Draft) -> None:
    rng, depth = d.rng, _DEPTH[d.profile]
    _reason(d)
    _history(d)
    _exam(d)
    if rng.random() < 0.8 + 0.05 * depth:
        _vitals(d)
    _tests(d)
    _course(d)
    _diagnosis(d)
    _therapy(d)
    _advice(d)
    if d.profile == "very_long":
        _lengthen(d, rng.randint(620, 950))
    _pad(d, rng.randint(40, 55))


def _pad(d: _Draft, min_words: int) -> None:
    """Top up a terse note with the routine sentences a real one would still carry."""
    rng = d.rng
    fillers = [lambda: _vitals(d) if "vitals" not in d.sections else None,
               lambda: d.add("history", rng.choice(_ALLERGY))
               if not any("llergi" in s for s in d.sections.get("history", [])) else None,
               lambda: d.add("exam", rng.choice(_NORMAL["heart"]) + "."),
               lambda: d.add("history", " ".join(d.pick(_ROUTINE, 2))),
               lambda: d.add("advice", _cap(rng.choice(_GENERIC_ADVICE)) + ".")
               if d.primary.status != "history" else None]
    for filler in fillers:
        if d.words >= min_words:
            return
        filler()


_PAST_EVENTS = (
    "accesso in PS per trauma cranico minore, dimess{o} dopo osservazione",
    "visita per stipsi, risolta con macrogol", "episodio isolato di vomito",
    "rinofaringite trattata a domicilio", "controllo cardiologico per soffio funzionale, "
    "ecocardiogramma nella norma", "ecografia delle anche nella norma", "esantema critico",
    "stomatite erpetica", "ingestione accidentale di una moneta, espulsa spontaneamente",
    "puntura d'insetto con ampia reazione locale", "visita ortopedica per piede piatto "
    "flessibile", "ipertrofia adenoidea con russamento notturno", "lieve anemia sideropenica "
    "trattata con ferro per os", "orticaria acuta dopo assunzione di fragole", "frattura "
    "composta della clavicola dopo caduta", "ferita lacero-contusa al mento suturata in PS",
    "ernia ombelicale, chiusa spontaneamente", "mughetto orale trattato con miconazolo gel",
    "sindrome mani-piedi-bocca", "episodio di laringospasmo notturno isolato",
)
_SOCIAL = (
    "Vive con i genitori e un fratello di {sib} anni.",
    "Animali domestici: {pet}.", "Frequenta la scuola {school}.", "Frequenta il nido da "
    "settembre.", "Pratica {sport} 2 volte a settimana.", "Alimentazione varia, buon appetito.",
    "Dorme regolarmente, circa {sleep} ore per notte.", "Non esposizione a fumo passivo.",
    "Abitazione in città, al {floor}° piano, senza muffe.", "Nessun viaggio all'estero negli "
    "ultimi mesi.", "Genitori entrambi lavoratori, accudit{o} dai nonni durante il giorno.",
)


def _past_event_lines(d: _Draft) -> list[str]:
    rng, lines = d.rng, []
    for event in d.pick(_PAST_EVENTS, rng.randint(4, 12)):
        at = rng.randint(1, max(1, d.age - 1))
        lines.append((at, f"{rng.choice(('A', 'All età di', 'Verso'))} {_age_text(at, rng)}: "
                          f"{event}.".replace("All età", "All'età")))
    return [text for _, text in sorted(lines)]


def _growth_lines(d: _Draft) -> list[str]:
    rng, lines = d.rng, []
    for at in sorted(rng.sample(range(1, d.age + 1), min(d.age, rng.randint(3, 6)))):
        kg = _dec(_median_weight(at) * rng.uniform(0.9, 1.1), d.ctx)
        lines.append(f"Controllo a {_age_text(at, rng)}: peso {kg} kg, "
                     f"{'lunghezza' if at < 24 else 'altezza'} "
                     f"{round(50 + 25 * (at / 12) ** 0.6)} cm, {rng.choice((10, 25, 50, 75))}° pc.")
    return lines


def _social_lines(d: _Draft) -> list[str]:
    rng = d.rng
    school = ("dell'infanzia" if d.age < 72 else "primaria" if d.age < 132
              else "secondaria di primo grado")
    values = {"sib": str(rng.randint(2, 14)), "school": school,
              "pet": rng.choice(("un cane", "un gatto", "nessuno", "un criceto")),
              "sport": rng.choice(("nuoto", "calcio", "danza", "pallavolo", "judo")),
              "sleep": str(rng.randint(8, 12)), "floor": str(rng.randint(1, 6))}
    return [t.format_map({**d.ctx, **values}) for t in d.pick(_SOCIAL, rng.randint(2, 5))]


def _lengthen(d: _Draft, target_words: int) -> None:
    """Grow a long note with a detailed anamnesis (and a diary on the ward) past the target."""
    rng = d.rng
    if not any(s.startswith("Nat") for s in d.sections.get("history", [])):
        _physiological(d)
    blocks = [("Anamnesi patologica remota: ", _past_event_lines(d)),
              ("Crescita: ", _growth_lines(d)), ("Anamnesi sociale: ", _social_lines(d))]
    if d.primary.status != "history":
        blocks.append(("Decorso a domicilio: ", _home_days(d, rng.randint(3, 6))))
    rng.shuffle(blocks)
    for title, lines in blocks:
        if lines and d.style != "narrative":
            lines[0] = "\n" + title + lines[0]
        for line in lines:
            d.add("history", line)
    day = len(d.sections.get("course", []))
    while d.words < target_words and day < (14 if d.setting == "reparto" else 5):
        day += 1
        _ward_day(d, day)


def _episode_ctx(d: _Draft, m: _Mention) -> dict[str, str]:
    episode = _episode_age(m.cond, d.age, d.rng)
    years_ago = max(0, (d.age - episode) // 12)
    return {"ep": _age_text(episode, d.rng), "year": str(int(d.ctx["year"]) - years_ago)}


def _note(index: int, cond: _Condition, status: str, rng: random.Random) -> DemoNote:
    d = _draft(cond, status, rng)
    _write(d)
    mentions = [d.primary, *d.secondaries]
    return DemoNote(
        id=f"PED-{index + 1:06d}",
        text=_render(d),
        labels=[f"{m.cond.key}:{m.status}" for m in mentions],
        condition=cond.key,
        status=status,
        age_months=d.age,
        sex="M" if d.ctx["o"] == "o" else "F",
        visit_date=d.ctx["date"],
        setting=d.setting,
    )


def generate_notes(n: int = 2000, seed: int = 0) -> Iterator[DemoNote]:
    """Yield `n` labelled notes; the same (n, seed) always yields the same notes.

    Primary (condition, status) pairs are allotted by largest remainder, so the label mix is
    exact for any n (2,000 notes: 176 confirmed and 176 suspected bronchiolitis), then shuffled.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    plan = _largest_remainder(n)
    rng.shuffle(plan)
    for index, (cond, status) in enumerate(plan):
        yield _note(index, cond, status, rng)


def write_csv(path: str | Path, n: int = 2000, seed: int = 0) -> Path:
    """CSV with header id,text,labels,condition,status,age_months,sex,visit_date,setting;
    labels joined by '|'. UTF-8, csv module quoting."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        for note in generate_notes(n, seed):
            writer.writerow([note.id, note.text, "|".join(note.labels), note.condition,
                             note.status, note.age_months, note.sex, note.visit_date,
                             note.setting])
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the seeded Prisma demo corpus as CSV.")
    parser.add_argument("out", type=Path, help="output CSV path")
    parser.add_argument("--n", type=int, default=2000, help="number of notes (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    path = write_csv(args.out, n=args.n, seed=args.seed)
    print(f"wrote {args.n} notes to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
