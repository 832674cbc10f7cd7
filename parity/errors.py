"""The errors that mean "bad input or unsupported case": exit code 2, one line."""

from __future__ import annotations

from .conventions import ConventionError
from .envs import EnvError
from .inputs import InputError


def _collect() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [InputError, EnvError, ConventionError]
    from .extract.engines import ServingExtractionError
    errors.append(ServingExtractionError)
    try:
        from .extract.trainers.speculators import TrainingExtractionError
        from .extract.trainers.speculators.draft import DraftError
        errors += [TrainingExtractionError, DraftError]
    except ImportError:  # pragma: no cover - training extractor not installed
        pass
    return tuple(errors)


USER_ERRORS = _collect()
