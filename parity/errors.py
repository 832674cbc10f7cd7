"""The errors that mean "bad input or unsupported case": exit code 2, one line."""

from __future__ import annotations

from .conventions import ConventionError
from .envs import EnvError
from .inputs import InputError


def _collect() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [InputError, EnvError, ConventionError]
    from .extract.engines.sglang import ServingExtractionError
    errors.append(ServingExtractionError)
    from .extract.trainers import names, trainer
    for name in names():
        errors += trainer(name).ERRORS
    return tuple(errors)


USER_ERRORS = _collect()
