"""A label-DP training run: the multi-stage orchestrator of Ghazi et al. (2021).

Methods:

- ``non-private``: one stage on the true labels (a reference; its ledger epsilon is infinite).
- ``lp-1st`` (alias ``rr``): randomized response on the whole training set, one stage.
- ``lp-2st`` / ``lp-mst``: the training set is split into stages. Stage 1 releases its labels by RR;
  stage t releases its labels by RR-with-prior, the prior being softmax(logits / temperature) of the
  model trained so far, then trains on them, optionally warm-started and optionally reusing earlier
  stages' noisy labels.

Loss (``loss``): ``forward`` (default) fits the model to what was released about each example:
the loss is -log sum_y p_model(y | x) w(y) with w(y) = Pr[z | y], the noise channel of its noisy
label z, which the mechanism's public parameters determine (forward correction, Patrini et al. 2017).
The model then estimates the *clean* class posterior, which makes it a calibrated prior for the
next stage, and all earlier noisy labels can be reused unfiltered. When stage 1 uses a cluster
prior pi, that prior holds label information the model cannot see otherwise, so it is folded in:
w(y) = pi(y) Pr[z | y] (a release with k = 1 then still teaches the cluster's belief). A model prior
is not folded in: it is built from earlier noisy labels that are reused anyway. ``ce`` is the
paper's plain cross-entropy on the noisy labels; earlier labels are then reused only where they fall
inside the new prior's top k. Both are post-processing of released labels and public inputs.

Prior of stage 1 (``prior``): ``uniform`` (plain RR), or ``cluster`` (Algorithm 4): public inputs
are encoded (``encoder``: PCA, or an autoencoder trained on the public inputs) and clustered with k-means; ``prior_epsilon`` (default a tenth of ``epsilon``) buys
a noisy label histogram per cluster over the whole training set, which (tempered by
``prior_temperature``) is every stage-1 example's prior. With ``combine_priors``, later stages use
the product of the model prior and the cluster prior (renormalised), and fold the cluster prior into
their training targets as stage 1 does. Every stage's RR then uses ``epsilon - prior_epsilon``, so each label's total stays ``epsilon``
(sequential composition, which the ledger checks).

``alibi`` (Malek et al. 2021): every label is released once as its one-hot vector plus Laplace
(2 / epsilon) noise per coordinate. ALIBI trains on the soft labels prior(y) Pr[z | y] / Z, with the
model's current prediction as the prior; the forward loss -log sum_y p(y | x) Pr[z | y] has exactly
that gradient (the soft label recomputed at every step), so ``alibi`` trains one stage with the
forward loss on the Laplace likelihoods.

``pate`` (Papernot et al. 2017, 2018): teachers trained on disjoint parts of the labelled data vote
on public inputs; GNMax (or its confident variant) answers each query with noisy votes, and the
student trains on the answers. (epsilon, delta)-label-DP: Gaussian noise has no pure-epsilon
guarantee, so it takes ``delta`` (:mod:`labeldp.training.pate`, :mod:`labeldp.accounting.pate`).

``dp-sgd`` is the full-DP baseline: inputs *and* labels private, (epsilon, delta)-DP for add-or-remove
one example. It reads the true labels inside DP-SGD's Poisson-sampled, clipped and noised gradient
steps (:mod:`labeldp.training.dpsgd`); its event (noise multiplier calibrated to epsilon and delta by
dp_accounting unless given) is recorded on the ledger before the first step.

Privacy of the label-DP methods: every example's label is randomised exactly once, by an epsilon-DP mechanism whose prior
does not depend on that example's label (it comes from a model trained on *other* examples' noisy
labels), so the run is epsilon-label-DP by parallel composition; the ledger computes this with
dp_accounting from what was actually released.
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from labeldp._validation import check_epsilon
from labeldp.accounting import (
    DPSGD_RELATION,
    NEIGHBORING_RELATION,
    PrivacyLedger,
    calibrate_noise_multiplier,
    dpsgd_epsilon,
    dpsgd_event,
    event_from_dict,
    event_to_dict,
    release_laplace_one_hot,
    release_pate_labels,
    release_randomized_response,
    release_rr_with_prior,
    release_true_labels,
)
from labeldp.data import DATASETS, LabeledDataset, load_dataset
from labeldp.priors import ENCODERS, cluster, cluster_priors, encode, histogram_priors
from labeldp.mechanisms import laplace_one_hot_likelihood, prior_top_k, randomized_response_likelihood, rr_with_prior_likelihood
from labeldp.models import MODELS, build_model
from labeldp.errors import ConfigError, InsecureNoiseWarning, RunDirectoryError
from labeldp.files import write_json_atomic
from labeldp.randomness import NoiseSource, public_rng, public_seed
from labeldp.training.rundir import RunDirectory
from labeldp.training.dpsgd.clipping import check_per_example_model
from labeldp.training.dpsgd.trainer import DPSGDConfig, check_training_options, sampling_plan, train_dpsgd
from labeldp.training.pate import PATEConfig, partition_teachers, select_queries, teacher_train_config, train_teachers
from labeldp.training.stage import (EpochRecord, TrainConfig, accuracy, check_amp, predict_proba, resolve_device,
                                    save_atomic, train_stage)

METHODS = ("non-private", "rr", "lp-1st", "lp-2st", "lp-mst", "alibi", "pate", "dp-sgd")
#: Methods whose Gaussian noise makes them (epsilon, delta)-DP: they take --delta.
GAUSSIAN_METHODS = ("pate", "dp-sgd")
DEFAULT_DELTA = 1e-5
LOSSES = ("forward", "ce")
PRIORS = ("uniform", "cluster")
MULTI_STAGE = ("lp-2st", "lp-mst")
#: Options of the cluster prior, refused with prior 'uniform' unless at their defaults.
CLUSTER_PRIOR_OPTIONS = ("prior_epsilon", "prior_temperature", "encoder", "clusters", "combine_priors")
#: Options that only some methods use (field -> those methods); a value other than the default with
#: any other method is refused rather than silently ignored (delta by its own, earlier check), and a
#: sweep's grid resets them to their defaults for those methods.
METHOD_OPTIONS = {
    "temperature": MULTI_STAGE, "reuse_labels": MULTI_STAGE, "warm_start": MULTI_STAGE, "combine_priors": MULTI_STAGE,
    "loss": ("non-private", "rr", "lp-1st", "lp-2st", "lp-mst", "alibi"),
    "secure_rng": tuple(m for m in METHODS if m != "non-private"),
    "insecure_noise_seed": tuple(m for m in METHODS if m != "non-private"),
    "delta": GAUSSIAN_METHODS,
    "dpsgd": ("dp-sgd",),
    "pate": ("pate",),
}
DEFAULT_STAGES = {"non-private": (1.0,), "rr": (1.0,), "lp-1st": (1.0,), "lp-2st": (0.4, 0.6), "lp-mst": (0.3, 0.3, 0.4), "alibi": (1.0,), "pate": (1.0,),
                  "dp-sgd": (1.0,)}


@dataclass
class RunConfig:
    """Everything needed to repeat a run. Written to ``config.json``."""

    dataset: str = "digits"
    method: str = "lp-2st"
    epsilon: float | None = None
    delta: float | None = None
    stages: tuple[float, ...] | None = None
    model: str | None = None
    temperature: float = 1.0
    prior: str = "uniform"
    prior_epsilon: float | None = None
    prior_temperature: float = 1.0
    clusters: int = 100
    encoder: str = "pca"
    combine_priors: bool = False
    loss: str = "forward"
    reuse_labels: bool = True
    warm_start: bool = True
    seed: int = 0
    secure_rng: bool = False
    insecure_noise_seed: int | None = None
    data_dir: str | None = None
    table: str | None = None
    label_column: str = "label"
    test_table: str | None = None
    classes: tuple[str, ...] | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    dpsgd: DPSGDConfig = field(default_factory=DPSGDConfig)
    pate: PATEConfig = field(default_factory=PATEConfig)

    def resolved(self) -> RunConfig:
        """Validate every field and fill in defaults (stage fractions); raises ``ValueError``."""
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose one of {', '.join(DATASETS)}")
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.model is not None and self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        epsilon = None
        if self.method != "non-private":
            if self.epsilon is None:
                raise ValueError(f"method {self.method!r} needs --epsilon")
            epsilon = check_epsilon(self.epsilon)
        elif self.epsilon is not None:
            raise ValueError("method 'non-private' takes no epsilon")
        stages = tuple(float(s) for s in (self.stages or DEFAULT_STAGES[self.method]))
        if any(not s > 0 for s in stages) or abs(sum(stages) - 1.0) > 1e-6:
            raise ValueError(f"stages must be positive fractions summing to 1, got {list(stages)}")
        expected = {"lp-2st": 2, "non-private": 1, "rr": 1, "lp-1st": 1, "alibi": 1, "pate": 1, "dp-sgd": 1}.get(self.method)
        if expected is not None and len(stages) != expected:
            raise ValueError(f"method {self.method!r} has {expected} stage(s), got {len(stages)} fractions")
        if self.method == "lp-mst" and len(stages) < 2:
            raise ValueError("method 'lp-mst' needs at least two stages")
        prior_epsilon = None
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if self.prior == "cluster":
            if epsilon is None:
                raise ValueError("prior 'cluster' spends privacy budget: it needs a private method and --epsilon")
            prior_epsilon = check_epsilon(self.prior_epsilon if self.prior_epsilon is not None else epsilon / 10,
                                          "prior_epsilon")
            if prior_epsilon >= epsilon:
                raise ValueError(f"prior_epsilon ({prior_epsilon:g}) must be smaller than epsilon ({epsilon:g})")
            if self.clusters < 1:
                raise ValueError(f"clusters must be at least 1, got {self.clusters}")
            if self.encoder not in ENCODERS:
                raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
            if not self.prior_temperature > 0:
                raise ValueError(f"prior_temperature must be > 0, got {self.prior_temperature}")
        elif changed := [name for name in CLUSTER_PRIOR_OPTIONS if getattr(self, name) != getattr(RunConfig, name)]:
            raise ValueError(f"{', '.join(changed)} {'applies' if len(changed) == 1 else 'apply'} only with prior 'cluster'")
        if self.method == "alibi" and (self.loss != "forward" or self.prior != "uniform"):
            raise ValueError("method 'alibi' trains on its Laplace likelihoods: it takes loss 'forward' and no prior")
        delta = None
        if self.method in GAUSSIAN_METHODS:
            delta = DEFAULT_DELTA if self.delta is None else float(self.delta)
            if not 0.0 < delta < 1.0:
                raise ValueError(f"delta must lie in (0, 1), got {delta}")
            if self.prior != "uniform":
                raise ValueError(f"method {self.method!r} uses no label prior")
        elif self.delta is not None:
            raise ValueError(f"delta applies only to methods {' and '.join(GAUSSIAN_METHODS)} (the other "
                             "label-DP methods are pure epsilon-DP)")
        self._check_method_options()
        if self.secure_rng and self.insecure_noise_seed is not None:
            raise ConfigError("secure_rng draws the noise from a CSPRNG and insecure_noise_seed makes it reproducible: "
                              "choose one")
        if self.classes is not None:
            if self.dataset != "csv":
                raise ConfigError(f"classes are declared for dataset 'csv'; dataset {self.dataset!r} defines its own")
            if len(self.classes) < 2 or len(set(self.classes)) != len(self.classes):
                raise ConfigError(f"classes must be at least two distinct values, got {list(self.classes)}")
        if self.method == "dp-sgd":
            check_training_options(self.train, self.dpsgd)
            self.dpsgd.validate()
        if self.method == "pate":
            self.pate.validate()
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        self.train.validate()
        classes = tuple(str(c) for c in self.classes) if self.classes is not None else None
        return dataclasses.replace(self, epsilon=epsilon, delta=delta, stages=stages, prior_epsilon=prior_epsilon,
                                   classes=classes)

    def _check_method_options(self) -> None:
        """Refuse options the method does not use that were changed from their defaults: a user who
        sets one expects it to act."""
        defaults, unused = RunConfig(), []
        for name in options_unused_by(self.method):
            value, default = getattr(self, name), getattr(defaults, name)
            if value == default:
                continue
            if dataclasses.is_dataclass(value):  # a method's own settings: name those that were changed
                unused += [f"{name}.{f.name}" for f in dataclasses.fields(value)
                           if getattr(value, f.name) != getattr(default, f.name)]
            else:
                unused.append(name)
        if unused:
            raise ValueError(f"method {self.method!r} does not use {', '.join(unused)}; leave "
                             f"{'it' if len(unused) == 1 else 'them'} at the default")

    @property
    def label_epsilon(self) -> float | None:
        """The epsilon of each stage's label release: what is left after the prior's share."""
        if self.epsilon is None:
            return None
        return self.epsilon - (self.prior_epsilon or 0.0)

    @property
    def noise(self) -> NoiseSource:
        """Where the run's noise comes from (:mod:`labeldp.randomness`)."""
        return NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stages"] = list(self.stages) if self.stages else None
        data["classes"] = list(self.classes) if self.classes is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        data = dict(data)
        data["train"] = TrainConfig(**data.get("train", {}))
        data["dpsgd"] = DPSGDConfig(**data.get("dpsgd", {}))
        data["pate"] = PATEConfig(**data.get("pate", {}))
        for name in ("stages", "classes"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        return cls(**data)


#: Options that act only after the first stage's labels are released: stage 1's labels and the
#: cluster histogram do not depend on them, so a run may continue from those releases with new values.
TRAINING_OPTIONS = ("train", "model", "loss", "reuse_labels", "warm_start", "temperature", "combine_priors")


def release_inputs(config: RunConfig, name: str) -> dict[str, Any]:
    """The configuration that release ``name`` of a run depended on: for stage 1 and the cluster
    histogram everything but :data:`TRAINING_OPTIONS`; for later stages (whose prior is the model
    trained so far) and for PATE's answers (votes of teachers trained with the training options)
    everything."""
    inputs = config.to_dict()
    if name in ("stage1", "prior") and config.method != "pate":
        for option in TRAINING_OPTIONS:
            inputs.pop(option)
    return inputs


def options_unused_by(method: str) -> tuple[str, ...]:
    """The RunConfig fields of :data:`METHOD_OPTIONS` that ``method`` does not use."""
    return tuple(name for name, methods in METHOD_OPTIONS.items() if method not in methods)


def release_evidence(prior: np.ndarray | None, likelihood: np.ndarray, floor: float = 1e-4) -> np.ndarray:
    """Per-class weight of what was released about an example, normalised: prior(y) * Pr[noisy label | y]
    (proportional to the posterior of its true label), or the channel alone when ``prior`` is None.

    The prior is floored at ``floor`` so that a class it ruled out is unlikely, not impossible.
    """
    weights = likelihood if prior is None else np.maximum(prior, floor) * likelihood
    return weights / weights.sum(axis=1, keepdims=True)


def temper(priors: np.ndarray, temperature: float) -> np.ndarray:
    """Rows proportional to priors^(1 / temperature): flatter above 1 (RR-with-prior then keeps more
    labels in its top k), sharper below."""
    if temperature == 1.0:
        return priors
    tempered = np.power(priors, 1.0 / temperature)
    return tempered / tempered.sum(axis=1, keepdims=True)


def split_stages(num_examples: int, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Disjoint random index sets with the given size fractions (deterministic in ``seed``)."""
    order = public_rng(seed, "stage-split").permutation(num_examples)
    bounds = np.round(np.cumsum((0.0,) + fractions) * num_examples).astype(int)
    return [np.sort(order[bounds[i]:bounds[i + 1]]) for i in range(len(fractions))]


class _Run:
    """State of one run while it executes (see :func:`train_run`)."""

    def __init__(self, config: RunConfig, out: RunDirectory, data: LabeledDataset, device: torch.device, progress: bool):
        self.config, self.out, self.data, self.device, self.progress = config, out, data, device, progress
        relation = DPSGD_RELATION if config.method == "dp-sgd" else NEIGHBORING_RELATION
        self.ledger = out.read_ledger(len(data.y_train), relation)
        self.started = time.perf_counter()
        self.elapsed_before = out.elapsed()

    def seconds(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started


    def _spend(self, name: str, draw) -> dict[str, np.ndarray]:
        """A release read back if saved; else drawn once (on a scratch ledger), saved, then recorded.

        ``draw(scratch_ledger)`` returns the arrays to save and records exactly one entry.
        """
        saved = self.out.load_release(name)
        if saved is not None:
            if not self.ledger.has(name):  # crashed between saving the release and the ledger
                self.ledger.record(event_from_dict(json.loads(str(saved["event"]))), saved["members"],
                                   str(saved["description"]), name)
                self.ledger.save(self.out.ledger_path)
            return saved
        if self.ledger.has(name):
            raise RunDirectoryError(
                f"{self.out.ledger_path} records the release {name!r}, but {self.out.release_path(name)} is missing. "
                "Drawing those labels again would spend their budget a second time: restore the file from a copy "
                "of the run folder, or start again in a new folder (a new release, with its own ledger)")
        scratch = PrivacyLedger(self.ledger.dataset_size)
        arrays = draw(scratch)
        entry = scratch.entries[0]
        arrays.update(members=np.flatnonzero(entry.members), event=np.array(json.dumps(event_to_dict(entry.event))),
                      description=np.array(entry.description),
                      config=np.array(json.dumps(release_inputs(self.config, name), sort_keys=True)))
        self.out.save_release(name, **arrays)
        self.ledger.record(entry.event, entry.members, entry.description, name)
        self.ledger.save(self.out.ledger_path)
        return arrays

    def cluster_prior_rows(self) -> np.ndarray:
        """Every training example's cluster prior (the noisy histogram is released once, on all labels)."""
        cfg, data = self.config, self.data

        def draw(scratch: PrivacyLedger) -> dict[str, np.ndarray]:
            features = encode(data.x_train, cfg.encoder, seed=cfg.seed, progress=self.progress)
            groups = cluster(features, cfg.clusters, seed=cfg.seed)
            everyone = np.arange(len(data.y_train))
            _, counts = cluster_priors(scratch, data.y_train, everyone, groups, cfg.clusters, data.num_classes,
                                       cfg.prior_epsilon, cfg.noise.generator("histogram"), "prior")
            return {"clusters": groups, "counts": counts}

        released = self._spend("prior", draw)
        return temper(histogram_priors(released["counts"]), self.config.prior_temperature)[released["clusters"]]

    def release(self, stage: int, members: np.ndarray, model: torch.nn.Module | None) -> dict[str, np.ndarray]:
        """The stage's noisy labels (with their indices, k and noise channel)."""
        cfg, data = self.config, self.data
        epsilon = cfg.label_epsilon

        def draw(scratch: PrivacyLedger) -> dict[str, np.ndarray]:
            tag, true = f"stage{stage}", data.y_train[members]
            k = np.full(members.size, data.num_classes)
            extra: dict[str, np.ndarray] = {}
            if cfg.method == "non-private":
                labels = release_true_labels(scratch, true, members, data.num_classes, tag)
                likelihood = evidence = np.eye(data.num_classes)[labels]
            elif cfg.method == "alibi":
                noisy = release_laplace_one_hot(scratch, true, members, data.num_classes, epsilon,
                                                self.config.noise.generator("label-release", stage), tag)
                likelihood = evidence = laplace_one_hot_likelihood(noisy, epsilon)
                labels = noisy.argmax(axis=1)
                extra["noisy_one_hot"] = noisy.astype(np.float32)
            elif stage == 1 and cfg.prior == "uniform":
                labels = release_randomized_response(scratch, true, members, data.num_classes, epsilon,
                                                     self.config.noise.generator("label-release", stage), tag)
                likelihood = evidence = randomized_response_likelihood(labels, data.num_classes, epsilon)
            else:
                # A cluster prior carries label information the model cannot see otherwise; a model
                # prior is the model's own belief, built from labels that are reused anyway.
                public = self.cluster_prior_rows()[members] if cfg.prior == "cluster" else None
                if stage == 1:
                    prior = public
                else:
                    prior = predict_proba(model, data.x_train[members], cfg.temperature)
                    if cfg.combine_priors:
                        prior = release_evidence(public, prior)
                    else:
                        public = None
                labels, k = release_rr_with_prior(scratch, true, members, prior, epsilon, self.config.noise.generator("label-release", stage), tag)
                likelihood = rr_with_prior_likelihood(labels, prior, epsilon)
                evidence = release_evidence(public, likelihood)
            return {"indices": members, "labels": labels, "k": k, "likelihood": likelihood.astype(np.float32),
                    "evidence": evidence.astype(np.float32), **extra}

        return self._spend(f"stage{stage}", draw)

    def reused(self, stage: int, model: torch.nn.Module) -> dict[str, np.ndarray]:
        """Earlier stages' noisy labels to train on again (post-processing only).

        With the forward loss all of them, each with its own noise channel; with plain cross-entropy
        only those inside the current prior's top k (the paper's filter).
        """
        earlier = [self.out.load_release(f"stage{s}") for s in range(1, stage)]
        reused = {key: np.concatenate([e[key] for e in earlier]) for key in ("indices", "labels", "evidence")}
        if self.config.loss == "forward":
            return reused
        prior = predict_proba(model, self.data.x_train[reused["indices"]], self.config.temperature)
        _, in_top_k = prior_top_k(prior, self.config.label_epsilon)
        keep = in_top_k[np.arange(reused["indices"].size), reused["labels"]]
        return {key: value[keep] for key, value in reused.items()}

    def new_model(self, stage: int) -> torch.nn.Module:
        seed = public_seed(self.config.seed, "model-init", stage)
        return build_model(self.config.model, self.data.input_shape, self.data.num_classes, seed).to(self.device)

    def on_epoch_end(self, stage: int, stages: int):
        def record(row: EpochRecord) -> None:
            self.out.append_metrics({"stage": stage, **asdict(row)})
            self.out.write_elapsed(self.seconds())
            if self.progress:
                acc = f"  test accuracy {row.test_accuracy:.4f}" if row.test_accuracy is not None else ""
                loss = f"  loss {row.train_loss:.4f}" if row.train_loss is not None else ""
                tqdm.write(f"stage {stage}/{stages} epoch {row.epoch}/{self.config.train.epochs}:{loss}{acc}  "
                           f"({row.seconds:.1f}s)")
        return record


def _restore_metrics(out: RunDirectory, stages: int) -> None:
    """Keep only the metric rows that the checkpoints vouch for (a crash may leave extra rows)."""
    rows = []
    for stage in range(1, stages + 1):
        path = out.checkpoint_path(stage)
        if path.exists():
            history = torch.load(path, weights_only=False)["history"]
            rows += [{"stage": stage, **row} for row in history]
    out.rewrite_metrics(rows)


def config_dataset(config: RunConfig) -> LabeledDataset:
    """The dataset a run configuration names (loaded from its files)."""
    return load_dataset(config.dataset, config.data_dir, table=config.table, label_column=config.label_column,
                        test_table=config.test_table, classes=config.classes, split_seed=config.seed)


def load_run_model(run_dir: str | Path, config: RunConfig, data: LabeledDataset) -> torch.nn.Module:
    """The final model of a finished run (its ``model.pt``), on the CPU."""
    model = build_model(config.model, data.input_shape, data.num_classes)
    model.load_state_dict(torch.load(Path(run_dir) / "model.pt", weights_only=True))
    return model


def train_run(config: RunConfig, out_dir: str | Path, *, device: str = "auto", progress: bool = True,
              dataset: LabeledDataset | None = None) -> dict[str, Any]:
    """Run (or resume) ``config`` in ``out_dir`` and return its summary.

    Running again on an existing directory continues from the last completed epoch, reuses the saved
    noisy labels and leaves the ledger unchanged; a finished run just returns its summary. A
    directory holding a run with a different configuration is refused, unless the run is unfinished
    and its saved releases do not depend on what changed: training then restarts from them.
    Everything that can be checked is checked before the run directory is written.
    """
    config = config.resolved()
    data = dataset if dataset is not None else config_dataset(config)
    check_plan(config, data, resolve_device(device))
    if not config.noise.private:
        warnings.warn(f"the run's noise is {config.noise.describe()}", InsecureNoiseWarning, stacklevel=2)
    out = RunDirectory(out_dir)
    with out.lock():
        return _train_locked(config, out, data, device, progress)


def check_plan(config: RunConfig, data: LabeledDataset, device: torch.device) -> None:
    """Refuse, before anything is written or released, a resolved ``config`` that cannot run on
    ``data``: a stage left without examples, a model that does not fit the inputs, more clusters than
    examples, amp off a GPU, a PATE or DP-SGD plan the budget cannot pay for."""
    check_amp(config.train, device)
    n = len(data.y_train)
    sizes = [part.size for part in split_stages(n, config.stages, config.seed)]
    if min(sizes) == 0:
        raise ConfigError(f"stages {list(config.stages)} leave stage {sizes.index(0) + 1} without any of the {n} "
                          "training examples")
    try:
        build_model(config.model, data.input_shape, data.num_classes)
    except ValueError as error:
        raise ConfigError(f"{error} (the dataset's inputs have shape {data.input_shape})") from None
    if config.prior == "cluster" and config.clusters > n:
        raise ConfigError(f"clusters ({config.clusters}) exceeds the {n} training examples")
    if config.method == "pate":
        config.pate.plan(config.epsilon, config.delta, n)
    if config.method == "dp-sgd":
        _check_dpsgd_plan(config, data)


def _accept_changed_config(saved: dict[str, Any], config: RunConfig, out: RunDirectory, progress: bool) -> None:
    """Let an unfinished run continue under a changed configuration when every release it saved
    stays what the new configuration would have released (e.g. only training options changed after
    stage 1's labels); its training then restarts from those releases. Otherwise refuse."""
    # Filling in defaults lets a run written before an option existed resume under the default.
    existing = RunConfig.from_dict(saved).to_dict()
    new = config.to_dict()
    if existing == new:
        return
    differs = ", ".join(sorted(k for k in set(existing) | set(new) if existing.get(k) != new.get(k)))
    if out.read_summary() is not None:
        raise RunDirectoryError(f"{out.root} holds a finished run with a different configuration (differs in: "
                                f"{differs}); choose another output folder")
    stale = [name for name, inputs in out.release_inputs().items() if inputs != release_inputs(config, name)]
    if out.ledger_path.exists() and out.read_ledger().has("dp-sgd"):
        stale.append("dp-sgd")  # its steps are the release: they ran under the old options
    if stale:
        raise RunDirectoryError(f"{out.root} holds a run with a different configuration (differs in: {differs}) "
                                f"whose releases {', '.join(stale)} depend on what changed; choose another output "
                                "folder (a new release), or run the saved configuration to finish this one")
    out.discard_training()
    if progress:
        tqdm.write(f"configuration changed ({differs}); the saved releases still hold: training restarts from them")


def _train_locked(config: RunConfig, out: RunDirectory, data: LabeledDataset, device: str,
                  progress: bool) -> dict[str, Any]:
    saved = out.read_config()
    if saved is not None:
        _accept_changed_config(saved, config, out, progress)
    finished = out.read_summary()
    if finished is not None:
        return finished
    out.create()
    out.write_config(config.to_dict())
    _restore_metrics(out, len(config.stages))
    run = _Run(config, out, data, resolve_device(device), progress)

    if config.method == "dp-sgd":
        return _train_dpsgd(config, out, data, run)
    if config.method == "pate":
        return _train_pate(config, out, data, run)
    members_by_stage = split_stages(len(data.y_train), config.stages, config.seed)
    if config.prior == "cluster":
        run.cluster_prior_rows()  # released (or read back) before any stage
    model = run.new_model(1)
    stage_summaries = []
    for stage, members in enumerate(members_by_stage, start=1):
        if stage > 1 and not config.warm_start:
            prior_model, model = model, run.new_model(stage)
        else:
            prior_model = model
        released = run.release(stage, members, prior_model)
        parts = [released]
        if stage > 1 and config.reuse_labels:
            parts.append(run.reused(stage, prior_model))
        indices = np.concatenate([p["indices"] for p in parts])
        targets = np.concatenate([p["evidence" if config.loss == "forward" else "labels"] for p in parts])
        reused = int(indices.size - members.size)
        train_stage(model, data.x_train[indices], targets, data.num_classes, config.train,
                    augmentation=data.augmentation, test=(data.x_test, data.y_test),
                    seed=public_seed(config.seed, "training", stage), checkpoint=out.checkpoint_path(stage),
                    on_epoch_end=run.on_epoch_end(stage, len(members_by_stage)), progress=progress,
                    description=f"stage {stage}/{len(members_by_stage)}")
        stage_summaries.append({"stage": stage, "released": int(members.size), "reused": reused,
                                "mean_k": float(np.mean(released["k"]))})

    return _finish(config, out, data, run, model, 0.0, stages=stage_summaries)


def _finish(config: RunConfig, out: RunDirectory, data: LabeledDataset, run: _Run, model: torch.nn.Module,
            delta: float, **facts: Any) -> dict[str, Any]:
    """Save the final model and the run's summary (epsilon at ``delta`` from the ledger, plus ``facts``)."""
    save_atomic(model.state_dict(), out.model_path)
    epsilon = run.ledger.epsilon(delta)
    summary = {
        "dataset": config.dataset,
        "method": config.method,
        "epsilon": None if not np.isfinite(epsilon) else round(epsilon, 6),
        "delta": delta,
        "neighboring_relation": run.ledger.relation_name,
        "test_accuracy": accuracy(model, data.x_test, data.y_test),
        "seconds": round(run.seconds(), 2),
        "seed": config.seed,
        "num_train": int(len(data.y_train)),
        "num_test": int(len(data.y_test)),
        **facts,
    }
    if config.method != "non-private":
        summary["noise"] = config.noise.describe()
        summary["noise_private"] = config.noise.private
    write_json_atomic(out.summary_path, summary)
    return summary


def _check_dpsgd_plan(config: RunConfig, data: LabeledDataset) -> None:
    """Refuse a DP-SGD run that cannot go as configured on ``data``: an expected batch larger than the
    data, a model that mixes examples, training options DP-SGD cannot honour on the dataset
    (:func:`check_training_options`), or a given noise multiplier that spends more than the budget."""
    q, steps, _ = sampling_plan(len(data.y_train), config.train)
    try:
        check_per_example_model(build_model(config.model, data.input_shape, data.num_classes))
    except ValueError as error:
        raise ValueError(f"{error} (in the CLI: choose a --model without BatchNorm, e.g. wrn16-4 for 32x32 "
                         "images)") from None
    check_training_options(config.train, config.dpsgd, data.augmentation)
    sigma = config.dpsgd.noise_multiplier
    if sigma is not None and (spent := dpsgd_epsilon(sigma, q, steps, config.delta)) > config.epsilon:
        raise ValueError(f"noise multiplier {sigma:g} ({steps} steps at Poisson rate {q:.4g}) spends epsilon "
                         f"{spent:.3g} at delta {config.delta:g}, more than the budget {config.epsilon:g}; "
                         "raise it, raise --epsilon, or leave the noise multiplier out to calibrate it")


def _train_dpsgd(config: RunConfig, out: RunDirectory, data: LabeledDataset, run: _Run) -> dict[str, Any]:
    """The full-DP baseline: record DP-SGD's event (once), then train with it."""
    n = len(data.y_train)
    q, steps, _ = sampling_plan(n, config.train)
    model = run.new_model(1)
    if not run.ledger.has("dp-sgd"):
        if config.dpsgd.noise_multiplier is None and run.progress:  # seconds of PLD accounting, before any step
            tqdm.write(f"calibrating the noise multiplier for epsilon {config.epsilon:g} at delta {config.delta:g} "
                       f"({steps} steps at Poisson rate {q:.4g}) with dp_accounting's PLD accountant")
        sigma = config.dpsgd.noise_multiplier or calibrate_noise_multiplier(config.epsilon, config.delta, q, steps)
        run.ledger.record(dpsgd_event(sigma, q, steps), np.arange(n),
                          f"DP-SGD, noise multiplier {sigma:.4f}, Poisson rate {q:.5g}, {steps} steps, "
                          f"clipping {config.dpsgd.max_grad_norm:g}", "dp-sgd")
        run.ledger.save(out.ledger_path, config.delta)
    event = next(e.event for e in run.ledger.entries if e.tag == "dp-sgd")
    sigma = event.event.event.noise_multiplier
    evaluated, _ = train_dpsgd(model, data.x_train, data.y_train, config.train, config.dpsgd, sigma,
                               augmentation=data.augmentation, test=(data.x_test, data.y_test),
                               seed=public_seed(config.seed, "dpsgd-augment"), noise=config.noise,
                               checkpoint=out.checkpoint_path(1),
                               on_epoch_end=run.on_epoch_end(1, 1), progress=run.progress)
    return _finish(config, out, data, run, evaluated.cpu(), config.delta, noise_multiplier=sigma,
                   sampling_probability=q, steps=steps)


def _train_pate(config: RunConfig, out: RunDirectory, data: LabeledDataset, run: _Run) -> dict[str, Any]:
    """PATE: teachers (resumable), one recorded release of the aggregated answers, then the student."""
    pate, n = config.pate, len(data.y_train)
    num_queries, noise_std = pate.plan(config.epsilon, config.delta, n)
    ratio = pate.threshold_noise_ratio_or_none
    teacher_of = partition_teachers(n, pate.teachers, config.seed)
    queries = select_queries(n, num_queries, config.seed)
    votes_checkpoint = out.private_path("teachers.npz")

    def draw(scratch: PrivacyLedger) -> dict[str, np.ndarray]:
        predictions = train_teachers(
            lambda t: build_model(config.model, data.input_shape, data.num_classes,
                                  public_seed(config.seed, "pate-teachers", t)).to(run.device),
            data.x_train, data.y_train, teacher_of, data.x_train[queries], data.num_classes,
            teacher_train_config(config.train, pate), augmentation=data.augmentation, seed=config.seed,
            checkpoint=votes_checkpoint, progress=run.progress)
        threshold = pate.threshold * pate.teachers if pate.confident else None
        answered, labels = release_pate_labels(scratch, predictions, teacher_of, np.arange(n), data.num_classes,
                                               noise_std, threshold, None if ratio is None else ratio * noise_std,
                                               config.noise.generator("pate-votes"), "pate")
        return {"queries": queries, "answered": answered, "labels": labels, "noise_std": np.array(noise_std)}

    released = run._spend("pate", draw)
    run.ledger.save(out.ledger_path, config.delta)
    out.discard_private()  # the teachers' raw votes are not private: gone once the answers are released
    answered = released["answered"]
    if not answered.any():
        raise ValueError("no query was answered: lower --threshold or raise --queries (the budget is spent)")
    model = run.new_model(1)
    train_stage(model, data.x_train[released["queries"][answered]], released["labels"][answered], data.num_classes,
                config.train, augmentation=data.augmentation, test=(data.x_test, data.y_test),
                seed=public_seed(config.seed, "training", 1), checkpoint=out.checkpoint_path(1), on_epoch_end=run.on_epoch_end(1, 1),
                progress=run.progress, description="student")
    return _finish(config, out, data, run, model, config.delta, teachers=pate.teachers, queries=num_queries,
                   answered=int(answered.sum()), noise_std=float(released["noise_std"]))
