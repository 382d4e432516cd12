"""Label-inference audits: plant canary labels, attack what was released, bound epsilon from below.

- :func:`audit_mechanism` audits a label mechanism directly: canary labels are drawn uniformly from
  the K classes, the mechanism releases them, and the attacker guesses the released label. For RR
  this attacker is optimal, so the bound approaches the mechanism's true epsilon as canaries grow.
- :func:`audit_config` audits a whole training recipe: it copies the dataset and plants canaries,
  trains exactly as the recipe does in a separate directory with its own ledger, and guesses each
  canary's label from the model's confidence, abstaining below several thresholds. Canaries are
  either ``mislabeled`` (default): random training examples given a random label other than the one
  the reference model predicts for them (uniform over the K - 1 labels an attacker who sees that
  public prediction cannot rule out); or ``noise``: extra
  training examples whose inputs are random noise, with labels
  uniform over the K classes (no natural class, so a model that memorises labels shows it); for
  images the noise is drawn at a quarter of the resolution and upsampled, so that it survives the
  small translations of data augmentation. A well-regularised model mostly generalises past both
  kinds (on MNIST the non-private recipe audits at about 1.4 with mislabeled canaries, 0.6 with noise).
  Confidence is calibrated by a *reference* model
  trained by the same recipe without canaries (as LiRA calibrates membership scores): a candidate
  label scores log p_audited(c | x) - log p_reference(c | x), so a planted label the model memorised
  stands out from labels that are merely easy to confuse with the true one.

What an audit of a recipe costs: its canary run (and its reference run, when it trains one) releases
the real training labels of every example that is not a canary once more, with fresh noise (never the
audited run's). Their ledgers, on the audited examples, are written to ``audit_ledger.json`` and
composed with the audited run's (:mod:`labeldp.audit.spend`); the attacker reads nothing else of the
true labels (the label it rules out is the reference model's prediction, not the true one).
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
from labeldp.audit.bounds import epsilon_lower_bound
from labeldp.audit.spend import AUDIT_LEDGER, AuditLedger, audit_run_config
from labeldp.boundary import PrivateLabels
from labeldp.config.auditing import CANARY_KINDS, DEFAULT_CONFIDENCE
from labeldp.data import LabeledDataset
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.files import write_json_atomic
from labeldp.randomness import RandomSource, as_generator, public_rng
from labeldp.runs import RunConfig, RunDirectory, config_dataset, load_run_model, train_run
from labeldp.runs.run import saved_network
from labeldp.training import predict_proba

#: The attacker answers only its most confident guesses: these fractions of the canaries.
ANSWER_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: Probabilities are clipped here before taking logs: far-tail probabilities of two models differ
#: by orders of magnitude at random, and their ratio would drown the memorisation signal.
_PROBABILITY_FLOOR = 1e-6


@dataclass
class ThresholdResult:
    """What the attacker achieved when answering one fraction of the canaries.

    Parameters
    ----------
    answer_fraction, answered, correct, precision, epsilon_lower_bound
        The attributes of the same names.

    Attributes
    ----------
    answer_fraction : float
        The fraction of canaries the attacker answered (its most confident guesses).
    answered : int
        Number of guesses made.
    correct : int
        Number of right guesses.
    precision : float
        ``correct / answered``.
    epsilon_lower_bound : float
        The bound at this threshold, already at the Bonferroni-corrected level.
    """

    answer_fraction: float
    answered: int
    correct: int
    precision: float
    epsilon_lower_bound: float


@dataclass
class AuditResult:
    """The best bound over thresholds (already corrected for trying them all) and each threshold's.

    Parameters
    ----------
    epsilon_lower_bound, confidence, num_canaries, num_options, thresholds
        The attributes of the same names.

    Attributes
    ----------
    epsilon_lower_bound : float
        The largest bound over the thresholds, valid with probability >= ``confidence``.
    confidence : float
        The confidence of the bound.
    num_canaries : int
        Number of canaries guessed.
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
        """The result as plain types, for JSON.

        Returns
        -------
        dict
            The fields, the thresholds as a list of dicts.
        """
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

    At each answer fraction f the attacker answers its ceil(f * n) highest-``scores`` guesses; the
    reported bound is the largest over fractions, each computed at level (1 - confidence) / #fractions.

    Parameters
    ----------
    guesses : numpy.ndarray
        The attacker's guess for each of the n canaries, shape (n,).
    secrets : numpy.ndarray
        The canaries' secret labels, shape (n,).
    scores : numpy.ndarray
        The attacker's confidence in each guess, shape (n,) (higher: answered first).
    num_options : int
        Number of values each secret was uniform over, >= 2.
    confidence : float, optional
        Probability that the bound holds, in (0, 1) (default 0.95).
    answer_fractions : sequence of float, optional
        Fractions of the canaries answered (default :data:`ANSWER_FRACTIONS`).

    Returns
    -------
    AuditResult
        The best bound and each fraction's.

    Raises
    ------
    labeldp.errors.ConfigError
        If the three arrays are not non-empty 1-d arrays of one length, ``confidence`` is not in
        (0, 1), or ``num_options`` is below 2.
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
    """Audit ``mechanism`` (true labels -> released labels) on ``num_canaries`` uniform canary labels.

    The attacker guesses the released label for every canary; the bound uses num_options = K.

    Parameters
    ----------
    mechanism : callable
        Maps a 1-d integer array of labels in [0, num_classes) to the released labels, same shape.
    num_classes : int
        K, the number of classes.
    num_canaries : int
        Number of canary labels.
    confidence : float, optional
        Probability that the bound holds, in (0, 1) (default 0.95).
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the canary labels (see :mod:`labeldp.randomness`).

    Returns
    -------
    AuditResult
        The bound, with one threshold (every canary answered).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``confidence`` is not in (0, 1), ``num_classes`` is below 2, ``num_canaries`` is 0, or ``rng``
        is not an accepted source.
    """
    secrets = as_generator(rng).integers(0, num_classes, size=num_canaries)
    released = np.asarray(mechanism(secrets))
    return audit_guesses(released, secrets, np.zeros(num_canaries), num_classes, confidence, answer_fractions=(1.0,))


def noise_canaries(input_shape: tuple[int, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """Standard-normal noise inputs; images get 4x4-pixel blocks (robust to small translations).

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one input; (C, H, W) is treated as an image.
    count : int
        Number of inputs.
    rng : numpy.random.Generator
        The (public) generator.

    Returns
    -------
    numpy.ndarray
        float32 array of shape (count, *input_shape).
    """
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
    """The attacker: the label with the highest log-probability (minus the reference model's, if given).

    Each example's original label is excluded when ``original_labels`` is given. Probabilities are
    clipped below at 1e-6 before their logs are taken.

    Parameters
    ----------
    probabilities : numpy.ndarray
        The audited model's class probabilities, shape (n, K).
    original_labels : numpy.ndarray or None, optional
        Labels the attacker rules out, shape (n,) (for mislabeled canaries, the reference model's
        predictions).
    reference_probabilities : numpy.ndarray or None, optional
        The reference model's class probabilities, shape (n, K).

    Returns
    -------
    guesses : numpy.ndarray
        The guessed label of each example, shape (n,).
    scores : numpy.ndarray
        The score of each guess, shape (n,) (higher: more confident).
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
) -> dict[str, Any]:
    """Train ``config`` with planted canaries in ``out_dir/canary_run`` and audit the model.

    The reference model is the finished run in ``reference_dir`` (same recipe, no canaries; e.g.
    the audited run itself), else one trained in ``out_dir/reference_run``. Finished runs in
    ``out_dir`` are read back. Writes ``out_dir/audit.json`` and ``out_dir/audit_ledger.json`` (what
    the audit's runs released); nothing else is touched.

    The audit's runs release the real training labels again, with fresh noise (see the module
    docstring): the report's ``spent`` gives the audit's epsilon and, when the reference is the audited
    run, their composition.

    Parameters
    ----------
    config : labeldp.runs.RunConfig
        The recipe to audit.
    out_dir : str or pathlib.Path
        The audit's folder.
    num_canaries : int, optional
        Number of canaries, in [1, number of training examples] (default 1000).
    confidence : float, optional
        Probability that the bound holds, in (0, 1) (default 0.95).
    seed : int, optional
        Seed of the audit's public stream (which examples become canaries, their planted labels); with a
        recipe's insecure noise seed it also enters the audit runs' derived noise seeds (default 0).
    dataset : labeldp.data.LabeledDataset or None, optional
        The dataset, if not the one ``config`` names.
    device : str, optional
        Where to train (default ``"auto"``).
    progress : bool, optional
        Show progress bars (default False).
    reference_dir : str or pathlib.Path or None, optional
        A finished run of the same recipe to use as the reference model.
    canaries : str, optional
        ``"mislabeled"`` (default) or ``"noise"`` (see the module docstring).

    Returns
    -------
    dict
        The report written to ``audit.json``: the method, dataset, claimed epsilon (and its label-DP
        equivalent), the canary kind, the reference run, the canary run's test accuracy and time, the
        audit's spending (``spent``), the seed, and the fields of :class:`AuditResult`.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``canaries`` or ``num_canaries`` is invalid, or the recipe cannot run.
    labeldp.errors.LabelDPError
        Any other error a run raises (e.g. :class:`~labeldp.errors.RunDirectoryError` for a folder in an
        unexpected state).
    """
    config = config.resolved()
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
        train_run(audit_run_config(config, seed, 0), reference_dir, device=device, progress=progress, dataset=data)
        spend.add_run(reference_dir, "reference")
    reference_model = load_run_model(reference_dir)
    rng = public_rng(seed, "audit")
    if canaries == "mislabeled":
        indices = np.sort(rng.choice(len(data.y_train), num_canaries, replace=False))
        canary_inputs = data.x_train[indices]
        original = predict_proba(reference_model, canary_inputs).argmax(axis=1)  # public: no true label read
        secrets = (original + rng.integers(1, data.num_classes, size=num_canaries)) % data.num_classes
        canary_data, positions = dataclasses.replace(data, y_train=data.y_train.replaced(indices, secrets)), None
        num_options = data.num_classes - 1
    else:
        canary_inputs = noise_canaries(data.input_shape, num_canaries, rng)
        secrets = rng.integers(0, data.num_classes, num_canaries)
        canary_data = dataclasses.replace(
            data,
            x_train=np.concatenate([data.x_train, canary_inputs]),
            y_train=PrivateLabels.concatenate([data.y_train, PrivateLabels.public(secrets, data.num_classes)]),
        )
        positions = np.concatenate([np.arange(len(data.y_train)), np.full(num_canaries, -1)])
        original, num_options = None, data.num_classes
    summary = train_run(
        audit_run_config(config, seed, 1), out / "canary_run", device=device, progress=progress, dataset=canary_data
    )
    spend.add_run(out / "canary_run", "canary", positions)
    probabilities = predict_proba(load_run_model(out / "canary_run"), canary_inputs)
    reference = predict_proba(reference_model, canary_inputs)
    guesses, scores = guess_canary_labels(probabilities, original, reference)
    result = audit_guesses(guesses, secrets, scores, num_options, confidence)
    claimed = summary["epsilon"]
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
    """Where an audit of ``run_dir`` with these settings keeps its runs.

    One folder per setting, so a second audit with other canaries never reads the first one's runs back
    as its own.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The audited run's folder.
    kind : str
        The kind of audit (for a label audit, its canary kind).
    **settings
        The settings that name the folder.

    Returns
    -------
    pathlib.Path
        ``run_dir/audit/<kind>-<name><value>-...``, the settings sorted by name.
    """
    return Path(run_dir) / "audit" / "-".join([kind, *(f"{name}{value}" for name, value in sorted(settings.items()))])


def default_canaries(num_examples: int) -> int:
    """Canaries when none are given: 1000, or half the training set when it is smaller than 2000.

    Parameters
    ----------
    num_examples : int
        Number of training examples.

    Returns
    -------
    int
        The number of canaries, at least 1.
    """
    return max(1, min(1000, num_examples // 2))


def audit_run(
    run_dir: str | Path,
    *,
    num_canaries: int | None = None,
    seed: int = 0,
    canaries: str = CANARY_KINDS[0],
    dataset: LabeledDataset | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Audit the recipe of an existing run (its ``config.json``).

    The run itself is the reference model once it has finished; results go to a folder of
    ``run_dir/audit`` named by the settings (:func:`audit_folder`). A run trained on a dataset passed
    in memory needs it again: ``dataset``. ``num_canaries`` defaults to :func:`default_canaries` of the
    run's training set.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The run's folder.
    num_canaries : int or None, optional
        Number of canaries.
    seed : int, optional
        Seed of the audit (default 0).
    canaries : str, optional
        ``"mislabeled"`` (default) or ``"noise"``.
    dataset : labeldp.data.LabeledDataset or None, optional
        The run's dataset, needed when it was passed in memory.
    **kwargs
        Further keyword arguments of :func:`audit_config`.

    Returns
    -------
    dict
        :func:`audit_config`'s report, with the audit's ``folder``.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``run_dir`` has no ``config.json``.
    labeldp.errors.ConfigError
        If the run was trained on an in-memory dataset and ``dataset`` is not given, or as
        :func:`audit_config`.
    """
    config = audited_config(run_dir, dataset)
    if num_canaries is None:
        num_canaries = default_canaries(RunDirectory(run_dir).read_data_facts()["num_train"])
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
    """The configuration of the run to audit; a clear error when its data cannot be found again.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The run's folder.
    dataset : labeldp.data.LabeledDataset or None, optional
        The run's dataset, when it was passed in memory.

    Returns
    -------
    labeldp.runs.RunConfig
        The run's saved configuration.

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
