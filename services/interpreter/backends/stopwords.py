"""Stop-words of English and Italian, written without accents (terms are compared folded).

English: scikit-learn's list. Italian: the Snowball list, plus the elided forms that an
apostrophe leaves behind ("dell'", "nell'", "un'") and a few clinical-report fillers.
"""

from __future__ import annotations

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

ITALIAN = """
a ad al alla allo ai agli all agl alle anche avere abbia abbiamo abbiano abbiate ad avemmo avendo avesse
avessero avessi avessimo aveste avesti avete aveva avevamo avevano avevate avevi avevo avrai avranno avrebbe
avrebbero avrei avremmo avremo avreste avresti avrete avro avuta avute avuti avuto c che chi ci coi col come
con contro cui da dagl dagli dai dal dall dalla dalle dallo degl degli dei del dell della delle dello di dov
dove e ebbe ebbero ebbi ed era erano eravamo eravate eri ero essendo faccia facciamo facciano facciate faccio
facemmo facendo facesse facessero facessi facessimo faceste facesti faceva facevamo facevano facevate facevi
facevo fai fanno farai faranno farebbe farebbero farei faremmo faremo fareste faresti farete faro fece fecero
feci fosse fossero fossi fossimo foste fosti fu fui fummo furono gli ha hai hanno ho i il in io l la le lei lo
loro lui ma mi mia mie miei mio ne negl negli nei nel nell nella nelle nello noi non nostra nostre nostri
nostro o per perche piu quale quanta quante quanti quanto quella quelle quelli quello questa queste questi
questo sarai saranno sarebbe sarebbero sarei saremmo saremo sareste saresti sarete saro se sei si sia siamo
siano siate siete sono sta stai stando stanno starai staranno starebbe starebbero starei staremmo staremo
stareste staresti starete staro stava stavamo stavano stavate stavi stavo stemmo stesse stessero stessi
stessimo steste stesti stette stettero stetti stia stiamo stiano stiate sto su sua sue sugl sugli sui sul
sull sulla sulle sullo suo suoi ti tra tu tua tue tuo tuoi tutti tutto un una uno vi voi vostra vostre
vostri vostro e gia gli cosi pero poi dopo prima ogni altro altra altri altre molto poco essere stato stata
stati state viene vengono fa fare nr pz paziente anni anno giorni giorno ore circa
"""

STOP_WORDS: frozenset[str] = frozenset(ENGLISH_STOP_WORDS) | frozenset(ITALIAN.split())
