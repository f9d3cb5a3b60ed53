"""Phrase pools shared by every condition: status cues, section headers, routine findings.

Italian clinical shorthand; {o} is the child's gender ending, and the other fields are filled
from `wording.note_context` or by the section writers.
"""

# Status phrasing. {c} condition, {C} capitalised, {x} its gender ending, {ep} age at episode.
SENTENCE = {
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
BARE = {  # what follows a "Diagnosi:" header
    "confirmed": ("{c}", "{c} in atto", "{c} confermat{x}", "{c} (diagnosi clinica)"),
    "suspected": ("sospett{x} {c}", "probabile {c}", "?{c}", "{c}?", "{c} da confermare",
                  "verosimile {c}", "{c} (sospetto)", "sospetto di {c}"),
    "excluded": ("esclus{x} {c}", "{c} esclus{x}", "non {c}"),
}
LABELLED = ("Diagnosi: {b}.", "Dx: {b}.", "Conclusioni: {b}.", "In conclusione: {b}.",
            "Diagnosi di dimissione: {b}.")
SECONDARY_ACTIVE = {
    "confirmed": ("Si associa {c}.", "Concomitante {c}.", "Associata {c}.",
                  "Concomitante quadro di {c}."),
    "suspected": ("Si associa sospett{x} {c}.", "Non si esclude concomitante {c}.",
                  "Possibile {c} associat{x}, da rivalutare."),
}
REFERRAL = ("Inviat{o} dal PLS con sospetto di {c}.", "Inviat{o} dal curante per sospett{x} "
            "{c}.", "Il PLS riferisce sospett{x} {c}.", "Giunge con richiesta del PLS: "
            "\"?{c}\".")

# Section headers, in the order sections are written.
HEADERS = {
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
ORDER = ("reason", "history", "exam", "vitals", "tests", "course", "diagnosis", "therapy",
         "advice")

# Normal findings per organ system, and the general impression.
NORMAL = {
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
GENERAL = ("Condizioni generali buone", "Buone condizioni generali", "Vigile, reattiv{o}",
           "Pz vigile e reattiv{o}", "Colorito roseo", "Si presenta vigile, collaborante per "
           "l'età", "Sensorio integro", "CG discrete", "Colorito lievemente pallido",
           "Condizioni generali discrete, lievemente sofferente")
WELL = 7  # the first WELL general impressions suit a child who is well
# Unlabelled visits for notes whose primary is past history: (reason, conclusion, urgent).
OTHER_VISITS = (
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
REASON_OTHER = ("Visita per {sx}.", "Si presenta per {sx}.", "Condott{o} {gen_da} per {sx}.",
                "{bimbo} di {age}, visitat{o} per {sx}.", "{sx}.")
GENERIC_ADVICE = ("controllo dal PLS tra 48-72 ore", "tornare in PS in caso di peggioramento",
                  "rivalutazione clinica se febbre persistente", "idratazione adeguata",
                  "antipiretico al bisogno se TC > 38,5 °C", "riposo a domicilio")

# Reason for the visit and the history of the complaint.
DURATION = ("da {days} giorni", "da ieri", "dalla notte", "da circa {hours} ore",
            "da {days} gg", "con esordio {days} giorni fa", "")
REASON = {
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
INTRO = ("{bimbo} di {age}.", "Età: {age}.", "{bimbo}, {age}.", "Pz di {age}.")
TIMELINE = ("Da {days} giorni {s1}, successivamente {s2}.", "Esordio con {s1}, poi {s2}.",
            "Ieri comparsa di {s1}.", "Nella notte peggioramento con {s1}.",
            "{gen} riferisce {s1} da alcuni giorni.", "Da {days} gg {s1} ingravescente.",
            "{s1} da {days} giorni, con {s2}.")
HOME = ("Febbre max {tmax} °C.", "Non febbre.", "Alimentazione ridotta (circa metà dei pasti).",
        "Alimentazione conservata.", "Diuresi conservata.", "Diuresi ridotta ({count} pannolini "
        "nelle ultime 24 ore).", "A domicilio paracetamolo con parziale beneficio.",
        "Già in terapia con lavaggi nasali.", "Frequenta il nido.", "Frequenta la scuola "
        "dell'infanzia.", "Fratello con sintomi simili.", "Contatti con familiari con sintomi "
        "respiratori.", "Non viaggi recenti.", "Alvo regolare.", "Sonno disturbato.",
        "Nessun farmaco assunto prima dell'accesso.")
ROUTINE = ("Alimentazione conservata.", "Diuresi conservata.", "Alvo regolare.",
           "Non viaggi recenti.", "Frequenta il nido.", "Frequenta la scuola dell'infanzia.",
           "Frequenta la scuola.", "Non fumatori in casa.", "Vaccinazioni in regola.")
REMOTE = ("APR: negativa.", "APR: muta.", "APR: nulla di rilevante.", "Anamnesi patologica "
          "remota negativa.", "Non patologie di rilievo in anamnesi.")
REMOTE_EXTRA = ("Ricovero neonatale per ittero trattato con fototerapia.", "Frequenti IVAS nel "
                "periodo invernale.", "Intervento di adenoidectomia.", "Frattura "
                "dell'avambraccio trattata con gesso.", "Reflusso gastroesofageo nei primi mesi, "
                "risolto.")
FAMILY = ("AF: negativa.", "AF: madre con rinite allergica.", "AF: padre con allergia ai "
          "pollini.", "Familiarità per atopia.", "Genitori sani, non consanguinei.",
          "Fumo passivo: padre fumatore.", "Non fumatori in casa.", "Un fratello maggiore sano.",
          "Nonno materno diabetico.")
ALLERGY = ("Allergie: nessuna nota.", "Non allergie note.", "Nega allergie a farmaci.")

# Tests, and the days of the course on the ward or at home.
LABS = ("Emocromo: GB {gb}/mmc, N {neu}%, Hb {hb} g/dl, PLT {plt}.000/mmc.", "PCR {pcr} mg/dl.",
        "PCT {pct} ng/ml.", "Glicemia {glu} mg/dl.", "Elettroliti nella norma.",
        "Emocromo e PCR nei limiti.", "Funzionalità renale nella norma.")
DAY = ("In {k}a giornata", "G{k}", "{k}° giorno di ricovero", "Giornata {k}", "Giorno {k}")
WARD = ("alimentazione in ripresa", "apiretic{o} da 24 ore", "diuresi valida",
        "notte tranquilla", "parametri stabili", "proseguita la terapia in atto",
        "genitori informati sull'andamento clinico", "picco febbrile trattato con paracetamolo",
        "peso stabile", "buona tolleranza dell'alimentazione per os", "lieve peggioramento nel "
        "pomeriggio, poi stabile", "rimosso accesso venoso", "condizioni generali buone",
        "sonno regolare", "colorito roseo", "obiettività invariata", "alvo regolare",
        "buona reattività", "sospesa idratazione ev", "giro visita senza novità")
WARD_RESP = ("progressivo miglioramento della dinamica respiratoria", "sospesa O2 terapia",
             "eseguiti lavaggi nasali e aspirazione", "riduzione del fabbisogno di ossigeno",
             "SpO2 stabile in aria ambiente durante il sonno", "tosse in riduzione")
WARD_OWN = ("persiste {symptom}", "{sign} in riduzione", "proseguita {therapy}",
            "ancora presente {symptom}", "non più {sign}")
HOME_DAY = ("Il giorno {k}", "In {k}a giornata di malattia", "Al {k}° giorno", "Nella {k}a "
            "giornata")
HOME_EVENT = ("comparsa di {s}", "persistenza di {s}", "peggioramento di {s}",
              "lieve miglioramento di {s}", "{s} soprattutto la notte")
HOME_EXTRA = ("febbre max {tmax} °C", "somministrato paracetamolo con beneficio",
              "contattato telefonicamente il PLS", "visitat{o} dal PLS che ha consigliato "
              "osservazione", "alimentazione ridotta", "sonno disturbato", "diuresi conservata",
              "alvo regolare", "nessun contatto noto con malati", "il fratello maggiore aveva "
              "sintomi simili", "assunto ibuprofene una volta", "non vomito", "buona "
              "reattività tra gli episodi", "{gen} riferisce pianto frequente",
              "assunte circa metà delle poppate", "rientro anticipato dal nido")

# Diagnosis when the condition is excluded, and therapy.
ALTERNATIVE = ("Quadro di {alt}.", "Diagnosi finale: {alt}.", "Si tratta di {alt}.",
               "Conclusione: {alt}.", "Il quadro è riferibile a {alt}.")
SYMPTOMATIC = ("paracetamolo {pcm} mg al bisogno", "lavaggi nasali con soluzione fisiologica",
               "ibuprofene {ibu} mg al bisogno")
THERAPY = ("Si imposta terapia con {list}.", "{list}.", "Terapia domiciliare: {list}.",
           "Prescrizione: {list}.", "Praticati: {list}.", "In PS: {list}.")

# The detailed anamnesis of very long notes.
PAST_EVENTS = (
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
SOCIAL = (
    "Vive con i genitori e un fratello di {sib} anni.",
    "Animali domestici: {pet}.", "Frequenta la scuola {school}.", "Frequenta il nido da "
    "settembre.", "Pratica {sport} 2 volte a settimana.", "Alimentazione varia, buon appetito.",
    "Dorme regolarmente, circa {sleep} ore per notte.", "Non esposizione a fumo passivo.",
    "Abitazione in città, al {floor}° piano, senza muffe.", "Nessun viaggio all'estero negli "
    "ultimi mesi.", "Genitori entrambi lavoratori, accudit{o} dai nonni durante il giorno.",
)
