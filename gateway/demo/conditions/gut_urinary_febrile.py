"""Gastroenteritis, urinary infection, fever without a source and febrile seizure.

Phrase pools are Italian clinical shorthand.
"""

from gateway.demo.conditions.model import Condition

GASTROENTERITIS = Condition(
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
)


UTI = Condition(
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
)


FEVER_NO_SOURCE = Condition(
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
)


FEBRILE_SEIZURE = Condition(
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
)
