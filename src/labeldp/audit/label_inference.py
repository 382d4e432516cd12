"""Label-inference audits: plant canary labels, attack what was released, bound epsilon from below.

:func:`audit_mechanism` audits a label mechanism directly (for RR the attacker is optimal).
:func:`audit_config` audits a recipe: it trains it with canaries in a folder of its own and guesses
each canary's label from the model, abstaining below several thresholds. Canaries are ``mislabeled``
(training examples given a label other than the reference model's prediction: uniform over the K - 1
an attacker seeing that public prediction cannot rule out) or ``noise`` (extra random-noise inputs
with uniform labels; for images drawn at a quarter of the resolution so they survive translations).
A *reference* model of the same recipe without canaries calibrates the scores, as LiRA does:
log p_audited(c | x) - log p_reference(c | x), so a memorised label stands out from a merely confusable one.

What it costs: its runs release the real labels of every non-canary example again, with fresh noise;
their ledgers go to ``audit_ledger.json`` (:mod:`labeldp.audit.spend`). The attacker reads no true label.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.policy import BudgetPolicy
from labeldp.audit.bounds import epsilon_lower_bound
from labeldp.audit.spend import AUDIT_LEDGER, AuditLedger, audit_run_config
from labeldp.boundary import PrivateLabels
from labeldp.config.auditing import CANARY_KINDS, DEFAULT_CONFIDENCE
from labeldp.data import LabeledDataset
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.files import write_json_atomic
from labeldp.randomness import RandomSource, as_generator, public_rng
from labeldp.runs import RunConfig, RunDirectory, config_dataset, load_run_model, train_run
from labeldp.runs.plan import saved_network
from labeldp.training import predict_proba

#: The attacker answers only its most confident guesses: these fractions of the canaries.
ANSWER_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: Probabilities are clipped here before taking logs: far-tail probabilities of two models differ
#: by orders of magnitude at random, and their ratio would drown the memorisation signal.
_PROBABILITY_FLOOR = 1e-6


@dataclass
class ThresholdResult:
    """What the attacker achieved answering its most confident ``answer_fraction`` of the canaries.

    ``epsilon_lower_bound`` is already at the Bonferroni-corrected level.
    """

    answer_fraction: float
    answered: int
    correct: int
    precision: float
    epsilon_lower_bound: float


@dataclass
class AuditResult:
    """The best bound over thresholds (already corrected for trying them all), and each threshold's.

    Attributes
    ----------
    epsilon_lower_bound : float
        The largest bound over the thresholds, holding with probability >= ``confidence``.
    num_options : int
        Number of values each secret was uniform over.
    thresholds : list of ThresholdResult
        Each threshold's result.
    """

    epsilon_lower_bound: float
    confidence: float
    num_canaries: int
    num_options: int
    thresholds: list[ThresholdResult]

    def to_dict(self) -> dict[str, Any]:
        """The result as plain types, for JSON."""
        return asdict(self)


def audit_guesses(
    guesses: np.ndarray,
    secrets: np.ndarray,
    scores: np.ndarray,
    num_options: int,
    confidence: float = DEFAULT_CONFIDENCE,
    answer_fractions=ANSWER_FRACTIONS,
) -> AuditResult:
    """Bound epsilon from guesses of secrets uniform over ``num_options`` values.

    At each answer fraction f the attacker answers its ceil(f n) highest-``scores`` guesses; the bound is
    the largest over fractions, each at level (1 - confidence) / len(answer_fractions).
    """
    guesses, secrets, scores = np.asarray(guesses), np.asarray(secrets), np.asarray(scores, dtype=float)
    if not (guesses.shape == secrets.shape == scores.shape) or guesses.ndim != 1 or guesses.size == 0:
        raise ConfigError("guesses, secrets and scores must be non-empty 1-d arrays of one length")
    order = np.argsort(-scores, kind="stable")
    hits = (guesses == secrets)[order]
    results = []
    for fraction in answer_fractions:
        answered = max(1, int(np.ceil(fraction * guesses.size)))
        correct = int(hits[:answered].sum())
        bound = epsilon_lower_bound(correct, answered, num_options, confidence, len(answer_fractions))
        results.append(ThresholdResult(fraction, answered, correct, correct / answered, bound))
    return AuditResult(max(r.epsilon_lower_bound for r in results), confidence, int(guesses.size), num_options, results)


def audit_mechanism(
    mechanism: Callable[[np.ndarray], np.ndarray],
    num_classes: int,
    num_canaries: int,
    confidence: float = DEFAULT_CONFIDENCE,
    rng: RandomSource = None,
) -> AuditResult:
    """Audit ``mechanism`` (labels -> released labels) on ``num_canaries`` uniform canary labels.

    The attacker guesses the released label; num_options is K, every canary is answered.
    """
    secrets = as_generator(rng).integers(0, num_classes, size=num_canaries)
    released = np.asarray(mechanism(secrets))
    return audit_guesses(released, secrets, np.zeros(num_canaries), num_classes, confidence, answer_fractions=(1.0,))


def with_train_labels(
    data: LabeledDataset, change: Callable[[PrivateLabels], PrivateLabels], **fields: Any
) -> LabeledDataset:
    """``data`` with ``change`` of its training labels (and other ``fields``): the PrivateLabels it holds
    (:class:`~labeldp.data.LabeledDataset` wraps an array it is given, its field typed as that array)."""
    labels = data.y_train
    assert isinstance(labels, PrivateLabels)
    return dataclasses.replace(data, y_train=change(labels), **fields)  # type: ignore[arg-type]  # see above


def noise_canaries(input_shape: tuple[int, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """Standard-normal noise inputs; images get 4x4-pixel blocks, which survive small translations."""
    if len(input_shape) != 3:
        return rng.normal(size=(count,) + tuple(input_shape)).astype(np.float32)
    channels, height, width = input_shape
    low = rng.normal(size=(count, channels, -(-height // 4), -(-width // 4)))
    return low.repeat(4, axis=2).repeat(4, axis=3)[:, :, :height, :width].astype(np.float32)


def guess_canary_labels(
    probabilities: np.ndarray,
    original_labels: np.ndarray | None = None,
    reference_probabilities: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The attacker's ``(guesses, scores)``: each example's label of highest log-probability.

    Minus the reference model's log-probability when given; ``original_labels`` are ruled out. The
    probabilities are floored at 1e-6 first: far-tail values of two models differ at random.
    """
    scores = np.log(np.clip(probabilities, _PROBABILITY_FLOOR, None))
    if reference_probabilities is not None:
        scores = scores - np.log(np.clip(reference_probabilities, _PROBABILITY_FLOOR, None))
    if original_labels is not None:
        scores[np.arange(len(scores)), original_labels] = -np.inf
    guesses = scores.argmax(axis=1)
    return guesses, scores[np.arange(len(scores)), guesses]


def audit_config(
    config: RunConfig,
    out_dir: str | Path,
    *,
    num_canaries: int = 1000,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    dataset: LabeledDataset | None = None,
    device: str = "auto",
    progress: bool = False,
    reference_dir: str | Path | None = None,
    canaries: str = CANARY_KINDS[0],
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Train ``config`` with planted canaries in ``out_dir/canary_run`` and audit the model; the report.

    The reference is the finished run in ``reference_dir`` (same recipe, no canaries: e.g. the audited
    run), else one trained in ``out_dir/reference_run``; finished runs in ``out_dir`` are read back. Writes
    ``audit.json`` and ``audit_ledger.json`` there. Its runs release the real training labels again (see
    :mod:`labeldp.audit.label_inference`): the report's ``spent`` gives the audit's epsilon and, when the
    reference is the audited run, their composition.

    Parameters
    ----------
    seed : int, optional
        Seed of the audit's public stream (canaries, planted labels); with an insecure noise seed it also
        enters the audit runs' derived noise seeds.
    reference_dir : str or pathlib.Path or None, optional
        A finished run of the same recipe, the reference model.
    canaries : str, optional
        ``"mislabeled"`` or ``"noise"``.
    """
    config = config.resolved()
    run: dict[str, Any] = dict(device=device, progress=progress, policy=policy or BudgetPolicy.from_environment())
    data = dataset if dataset is not None else config_dataset(config)
    if canaries not in CANARY_KINDS:
        raise ConfigError(f"canaries must be one of {CANARY_KINDS}, got {canaries!r}")
    if not 0 < num_canaries <= len(data.y_train):
        raise ConfigError(f"num_canaries must lie in [1, {len(data.y_train)}], got {num_canaries}")
    out = Path(out_dir)
    start = time.perf_counter()
    spend = AuditLedger(data.private_rows, _relation(config), data.units)  # on the audited run's ledger's rows
    if reference_dir is None or not (Path(reference_dir) / "model.pt").exists():
        reference_dir = out / "reference_run"
        train_run(audit_run_config(config, seed, 0), reference_dir, dataset=data, **run)
        spend.add_run(reference_dir, "reference")
    reference_model = load_run_model(reference_dir)
    rng = public_rng(seed, "audit")
    if canaries == "mislabeled":
        indices = np.sort(rng.choice(len(data.y_train), num_canaries, replace=False))
        canary_inputs = data.x_train[indices]
        original = predict_proba(reference_model, canary_inputs).argmax(axis=1)  # public: no true label read
        secrets = (original + rng.integers(1, data.num_classes, size=num_canaries)) % data.num_classes
        canary_data, positions = with_train_labels(data, lambda labels: labels.replaced(indices, secrets)), None
        num_options = data.num_classes - 1
    else:
        canary_inputs = noise_canaries(data.input_shape, num_canaries, rng)
        secrets = rng.integers(0, data.num_classes, num_canaries)
        canary_data = with_train_labels(
            data,
            lambda labels: PrivateLabels.concatenate([labels, PrivateLabels.public(secrets, data.num_classes)]),
            x_train=np.concatenate([data.x_train, canary_inputs]),
        )
        positions = np.concatenate([np.arange(len(data.y_train)), np.full(num_canaries, -1)])
        original, num_options = None, data.num_classes
    summary = train_run(audit_run_config(config, seed, 1), out / "canary_run", dataset=canary_data, **run)
    spend.add_run(out / "canary_run", "canary", positions)
    probabilities = predict_proba(load_run_model(out / "canary_run"), canary_inputs)
    reference = predict_proba(reference_model, canary_inputs)
    guesses, scores = guess_canary_labels(probabilities, original, reference)
    result = audit_guesses(guesses, secrets, scores, num_options, confidence)
    claimed = None if summary["epsilon"] in (None, "inf") else summary["epsilon"]
    # Replacing a label is removing the example and adding it back relabelled: an add-or-remove
    # (eps, delta) guarantee (DP-SGD) gives (2 eps, (1 + e^eps) delta) for a replaced label.
    label_epsilon = 2 * claimed if claimed is not None and config.method_spec.protects_examples else claimed
    audited_ledger = Path(reference_dir) / "ledger.json"
    spent = spend.report(
        config.delta or 0.0,
        PrivacyLedger.load(audited_ledger)
        if Path(reference_dir) != out / "reference_run" and audited_ledger.exists()
        else None,
    )
    report = {
        "method": config.method,
        "dataset": config.dataset,
        "claimed_epsilon": claimed,
        "claimed_label_epsilon": label_epsilon,
        "canaries": canaries,
        "reference_run": str(reference_dir),
        "canary_run_test_accuracy": summary.get("test_accuracy"),
        "canary_run_seconds": summary["seconds"],
        "seconds": round(time.perf_counter() - start, 2),
        "spent": spent,
        "seed": seed,
        **result.to_dict(),
    }
    out.mkdir(parents=True, exist_ok=True)
    spend.ledger.save(out / AUDIT_LEDGER, config.delta or 0.0)
    write_json_atomic(out / "audit.json", report)
    return report


def _relation(config: RunConfig):
    return config.method_spec.neighboring_relation


def audit_folder(run_dir: str | Path, kind: str, **settings: Any) -> Path:
    """``run_dir/audit/<kind>-<name><value>-...``: one folder per setting, so audits never read each other's runs."""
    return Path(run_dir) / "audit" / "-".join([kind, *(f"{name}{value}" for name, value in sorted(settings.items()))])


def default_canaries(num_examples: int) -> int:
    """Canaries when none are given: 1000, or half the training set when it is smaller than 2000."""
    return max(1, min(1000, num_examples // 2))


def run_canaries(run_dir: str | Path, num_canaries: int | None, name: str = "num_canaries") -> int:
    """``num_canaries``, or by default as many as the run's training size calls for (:func:`default_canaries`);
    ``name`` is how the caller takes the number."""
    if num_canaries is not None:
        return num_canaries
    facts = RunDirectory(run_dir).read_data_facts()
    if facts is None:
        raise RunDirectoryError(f"{run_dir} has no data.json, whose size sets the canaries: give {name}")
    return default_canaries(facts["num_train"])


def audit_run(
    run_dir: str | Path,
    *,
    num_canaries: int | None = None,
    seed: int = 0,
    canaries: str = CANARY_KINDS[0],
    dataset: LabeledDataset | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Audit the recipe of an existing run; :func:`audit_config`'s report with the audit's ``folder``.

    The finished run is the reference model; results go to :func:`audit_folder`. A run trained on a
    dataset passed in memory needs it again as ``dataset``.
    """
    config = audited_config(run_dir, dataset)
    num_canaries = run_canaries(run_dir, num_canaries)
    out = audit_folder(run_dir, canaries, canaries=num_canaries, seed=seed)
    return {
        **audit_config(
            config,
            out,
            reference_dir=run_dir,
            num_canaries=num_canaries,
            seed=seed,
            canaries=canaries,
            dataset=dataset,
            **kwargs,
        ),
        "folder": str(out),
    }


def audited_config(run_dir: str | Path, dataset: LabeledDataset | None = None) -> RunConfig:
    """The saved configuration of the run to audit, with the network it trained.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``run_dir`` has no ``config.json``.
    labeldp.errors.ConfigError
        If the run was trained on an in-memory dataset and ``dataset`` is None.
    """
    out = RunDirectory(run_dir)
    saved, facts = out.read_config(), out.read_data_facts()
    if saved is None:
        raise RunDirectoryError(f"{run_dir} has no config.json: not a labeldp run directory")
    if dataset is None and facts is not None and facts["source"] == "in-memory":
        raise ConfigError(
            f"{run_dir} was trained on a dataset passed in memory ({facts['name']!r}), which its folder "
            "does not hold (its labels are private): audit it from Python with "
            "labeldp.audit.audit_run(run_dir, dataset=...)"
        )
    if facts is None:
        return RunConfig.from_dict(saved)
    return RunConfig.from_dict({**saved, "model": saved_network(saved, facts)})  # the network it trained
