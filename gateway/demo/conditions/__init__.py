"""The conditions of the demo corpus, in the order the generator allots and draws them."""

from gateway.demo.conditions.ear_throat_eye_skin import (
    CONJUNCTIVITIS,
    DERMATITIS,
    OTITIS,
    PHARYNGITIS,
    VARICELLA,
)
from gateway.demo.conditions.gut_urinary_febrile import (
    FEBRILE_SEIZURE,
    FEVER_NO_SOURCE,
    GASTROENTERITIS,
    UTI,
)
from gateway.demo.conditions.model import SETTINGS, STATUSES, Condition
from gateway.demo.conditions.respiratory import ASTHMA, BRONCHIOLITIS, BRONCHITIS, CROUP, PNEUMONIA

# The order is part of the corpus: notes are allotted and secondaries drawn in it.
CONDITIONS: tuple[Condition, ...] = (
    BRONCHIOLITIS, OTITIS, PNEUMONIA, GASTROENTERITIS, ASTHMA, DERMATITIS, PHARYNGITIS, UTI,
    CROUP, VARICELLA, BRONCHITIS, CONJUNCTIVITIS, FEVER_NO_SOURCE, FEBRILE_SEIZURE,
)

__all__ = ["CONDITIONS", "SETTINGS", "STATUSES", "Condition"]
