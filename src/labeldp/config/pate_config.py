"""PATE's settings (``PATEConfig``) and its plan of queries and vote noise: a configuration, no torch."""

from __future__ import annotations

from dataclasses import dataclass

from labeldp.errors import BudgetError, ConfigError
from labeldp.options import option

AGGREGATORS = ("gnmax", "confident")


@dataclass(frozen=True)
class PATEConfig:
    """PATE's settings (the student trains as the run's :class:`~labeldp.config.train_config.TrainConfig` says); each
    field's meaning is its option's help.

    ``noise_std`` (flag ``--vote-noise``) is GNMax's vote noise sigma, in votes. The confident aggregator
    answers a query when its top vote count plus N(0, (threshold_noise_ratio * sigma)^2) reaches
    ``threshold`` x teachers. Given the run's (epsilon, delta), :meth:`plan` fills in what is left out:

    - neither ``queries`` nor ``noise_std``: sigma = teachers / 4 (noisy votes still pick the
      consensus of well-trained teachers) and as many queries as the budget pays for;
    - ``queries`` only: the smallest sigma that pays for them; ``noise_std`` only: the most queries.
    """

    teachers: int = option(250, help="teachers, each on its own part of the data")
    queries: int | None = option(
        None, help="public inputs the teachers vote on (default: as many as the budget pays for at --vote-noise)"
    )
    aggregator: str = option(
        "gnmax", choices=AGGREGATORS, help="confident: answer only queries whose noisy top vote reaches --threshold"
    )
    noise_std: float | None = option(
        None,
        flag="--vote-noise",
        help="GNMax noise std in votes (default: teachers / 4, or the smallest that pays for --queries)",
    )
    threshold: float = option(0.6, help="confident GNMax's threshold, a fraction of the teachers")
    threshold_noise_ratio: float = option(2.0, help="threshold check noise / vote noise")
    teacher_epochs: int = option(
        20, help="epochs of each teacher (--epochs and the other training options: the student's)"
    )
    teacher_batch_size: int = option(32, help="batch size of each teacher")

    def validate(self, num_train: int | None = None) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) settings PATE cannot run with, checking teachers and
        queries against ``num_train`` where given; public settings only, checked before any label is read."""
        if self.teachers < 2:
            raise ConfigError(f"teachers must be at least 2, got {self.teachers}")
        if self.queries is not None and self.queries < 1:
            raise ConfigError(f"queries must be at least 1, got {self.queries}")
        if num_train is not None and self.teachers > num_train:
            raise ConfigError(f"{self.teachers} teachers need at least as many training examples, got {num_train}")
        if num_train is not None and self.queries is not None and self.queries > num_train:
            raise ConfigError(f"queries ({self.queries}) cannot exceed the {num_train} training inputs")
        if self.aggregator not in AGGREGATORS:
            raise ConfigError(f"aggregator must be one of {AGGREGATORS}, got {self.aggregator!r}")
        if self.noise_std is not None and not self.noise_std > 0:
            raise ConfigError(f"noise_std must be > 0, got {self.noise_std}")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold is a fraction of the teachers in (0, 1], got {self.threshold}")
        if not self.threshold_noise_ratio > 0:
            raise ConfigError(f"threshold_noise_ratio must be > 0, got {self.threshold_noise_ratio}")
        if self.teacher_epochs < 1 or self.teacher_batch_size < 1:
            raise ConfigError("teacher_epochs and teacher_batch_size must be at least 1")

    @property
    def confident(self) -> bool:
        """Whether the aggregator is confident GNMax."""
        return self.aggregator == "confident"

    @property
    def threshold_noise_ratio_or_none(self) -> float | None:
        """``threshold_noise_ratio`` for the confident aggregator, None for plain GNMax."""
        return self.threshold_noise_ratio if self.confident else None

    def plan(self, epsilon: float, delta: float, num_train: int) -> tuple[int, float]:
        """(queries, vote noise sigma) within (epsilon, delta), from public settings only (computed before any
        label is read); the queries are at most ``num_train``, the noise calibrated to them where the budget
        pays for more.

        Raises
        ------
        labeldp.errors.ConfigError
            If a setting is invalid, or no vote noise pays for the given ``queries``.
        labeldp.errors.BudgetError
            If the given ``queries`` and ``noise_std`` cost more than ``epsilon``, or the budget does not pay
            for one query at the vote noise.
        """
        from labeldp.accounting.calibration import calibrate_vote_noise, max_queries, pate_epsilon

        self.validate(num_train)
        ratio = self.threshold_noise_ratio_or_none
        if self.queries is not None and self.noise_std is not None:
            spent = pate_epsilon(self.queries, self.noise_std, delta, None if ratio is None else ratio * self.noise_std)
            if spent > epsilon:
                raise BudgetError(
                    f"{self.queries} queries at vote noise {self.noise_std:g} cost epsilon "
                    f"{spent:.4g} > {epsilon:g}; give fewer queries or more noise"
                )
            return self.queries, self.noise_std
        if self.queries is not None:
            return self.queries, calibrate_vote_noise(epsilon, delta, self.queries, ratio)
        noise_std = self.noise_std if self.noise_std is not None else self.teachers / 4
        queries = max_queries(epsilon, delta, noise_std, ratio)
        if queries == 0:
            raise BudgetError(
                f"epsilon {epsilon:g} at delta {delta:g} does not pay for one query at vote noise "
                f"{noise_std:g}; use more teachers, a larger epsilon or give --queries"
            )
        if queries > num_train:
            return num_train, calibrate_vote_noise(epsilon, delta, num_train, ratio)
        return queries, noise_std


__all__ = ["AGGREGATORS", "PATEConfig"]
