"""Conditions of the ear, throat, eye and skin. Phrase pools are Italian clinical shorthand."""

from gateway.demo.conditions.model import Condition

OTITIS = Condition(
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
)


PHARYNGITIS = Condition(
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
)


CONJUNCTIVITIS = Condition(
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
)


DERMATITIS = Condition(
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
)


VARICELLA = Condition(
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
)
