"""Stop-words of English and Italian, written without accents (terms are compared folded).

English: scikit-learn's list (`sklearn.feature_extraction.text.ENGLISH_STOP_WORDS`, the Glasgow
Information Retrieval Group's; BSD-3-Clause), written out here: importing it from scikit-learn took 1.5 s
(its text-feature module and what that imports) in every process that names features, which use nothing
else of scikit-learn. tests/interpreter/test_interp_keywords.py checks that the two lists are the same.
Italian: the Snowball list, plus the elided forms that an apostrophe leaves behind ("dell'", "nell'",
"un'") and a few clinical-report fillers.
"""

from __future__ import annotations

ENGLISH = """
a about above across after afterwards again against all almost alone along already also although always am among
amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at back be
became because become becomes becoming been before beforehand behind being below beside besides between beyond
bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do done down due during
each eg eight either eleven else elsewhere empty enough etc even ever every everyone everything everywhere
except few fifteen fifty fill find fire first five for former formerly forty found four from front full further
get give go had has hasnt have he hence her here hereafter hereby herein hereupon hers herself him himself his
how however hundred i ie if in inc indeed interest into is it its itself keep last latter latterly least less
ltd made many may me meanwhile might mill mine more moreover most mostly move much must my myself name namely
neither never nevertheless next nine no nobody none noone nor not nothing now nowhere of off often on once one
only onto or other others otherwise our ours ourselves out over own part per perhaps please put rather re same
see seem seemed seeming seems serious several she should show side since sincere six sixty so some somehow
someone something sometime sometimes somewhere still such system take ten than that the their them themselves
then thence there thereafter thereby therefore therein thereupon these they thick thin third this those though
three through throughout thru thus to together too top toward towards twelve twenty two un under until up upon
us very via was we well were what whatever when whence whenever where whereafter whereas whereby wherein
whereupon wherever whether which while whither who whoever whole whom whose why will with within without would
yet you your yours yourself yourselves
"""

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

STOP_WORDS: frozenset[str] = frozenset(ENGLISH.split()) | frozenset(ITALIAN.split())
