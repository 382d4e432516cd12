"""The label-DP stages of Ghazi et al. (2021): ``non-private``, ``lp-1st`` (alias ``rr``), ``lp-2st``,
``lp-mst``.

- ``non-private``: one stage on the true labels (a reference; its ledger epsilon is infinite).
- ``lp-1st``: randomized response on the whole training set, one stage.
- ``lp-2st`` / ``lp-mst``: the training set is split into stages. Stage 1 releases its labels by RR;
  stage t releases its labels by RR-with-prior, the prior being softmax(logits / temperature) of the
  model trained so far, then trains on them, optionally warm-started and optionally reusing earlier
  stages' noisy labels.

Loss (``loss``; for numeric labels, a regression on a grid, also ``mse``: squared error of the
model's expected value against the released labels' values): ``forward`` (default) fits the model
to what was released about each example:
the loss is -log sum_y p_model(y | x) w(y) with w(y) = Pr[z | y], the noise channel of its noisy
label z, which the mechanism's public parameters determine (forward correction, Patrini et al. 2017).
The model then estimates the *clean* class posterior, which makes it a calibrated prior for the
next stage, and all earlier noisy labels can be reused unfiltered. When stage 1 uses a cluster
prior pi, that prior holds label information the model cannot see otherwise, so it is folded in:
w(y) = pi(y) Pr[z | y] (a release with k = 1 then still teaches the cluster's belief), and stage 1
trains by cross-entropy to that posterior, w / sum w (``posterior_loss``): the forward loss weighs
w by the model's own belief, so where the model is confidently wrong its gradient vanishes, and on
MNIST with a 96 %-pure prior a digit missed in the first epoch stayed missed. A model prior
is not folded in: it is built from earlier noisy labels that are reused anyway. ``ce`` is the
paper's plain cross-entropy on the noisy labels; earlier labels are then reused only where they fall
inside the new prior's top k. Both are post-processing of released labels and public inputs.

Prior of stage 1 (``prior``): ``uniform`` (plain RR), ``histogram`` (one noisy label histogram of
the whole training set as every example's prior) or ``cluster`` (Algorithm 4): public inputs are
encoded (``encoder``: PCA, or an autoencoder trained on the public inputs) and clustered with
k-means. ``prior_epsilon`` (default a tenth of ``epsilon``) buys the noisy label histogram (per
cluster) over the whole training set, which (tempered by ``prior_temperature``) is every stage-1
example's prior. With ``combine_priors``, later stages use the product of the model prior and the cluster prior
(renormalised), and fold the cluster prior into their training targets as stage 1 does. Every
stage's RR then uses ``epsilon - prior_epsilon``, so each label's total stays ``epsilon``
(sequential composition, which the ledger checks).

Privacy: every example's label is randomised exactly once, by an epsilon-DP mechanism whose prior
does not depend on that example's label (it comes from a model trained on *other* examples' noisy
labels), so the run is epsilon-label-DP by parallel composition; the ledger computes this with
dp_accounting from what was actually released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import (
    Release,
    release_noisy_histogram,
    release_randomized_response,
    release_rr_with_prior,
    release_true_labels,
)
from labeldp.data.splits import split_stages
from labeldp.mechanisms import prior_top_k
from labeldp.methods.protocol import MethodContext
from labeldp.methods.registry import Method, register_method
from labeldp.priors import cluster, encode, histogram_priors, release_evidence, temper

_PRIVATE_OPTIONS = frozenset({"secure_rng", "insecure_noise_seed"})
_LABEL_OPTIONS = frozenset({"loss", "prior"})
_MULTI_STAGE_OPTIONS = frozenset({"temperature", "reuse_labels", "warm_start", "combine_priors"})
#: Options that act only after the first stage's labels are released: stage 1's labels and the
#: cluster histogram do not depend on them (later stages' priors do: they come from the trained model).
TRAINING_OPTIONS = ("train", "model", "loss", "reuse_labels", "warm_start", "temperature", "combine_priors")
_FIRST_RELEASES = {"stage1": TRAINING_OPTIONS, "prior": TRAINING_OPTIONS}
#: LP-2ST's second release is drawn with the prior of the first stage's model, before the second stage
#: trains: it does not depend on how that stage trains (whether it reuses stage 1's labels, whether it
#: starts from the first model). Later stages of LP-MST do (through the models before them).
_TWO_STAGE_RELEASES = {**_FIRST_RELEASES, "stage2": ("reuse_labels", "warm_start")}
#: What shapes the first stage's model: how it trains. (The multi-stage options act from stage 2 on.)
_FIRST_STAGE_OPTIONS = ("train", "model", "loss")


def stage_releases(config) -> tuple[str, ...]:
    """The releases of a staged run: the noisy histogram of a cluster or histogram prior, then one per stage.

    Parameters
    ----------
    config : RunConfig
        The run's resolved configuration (its ``prior`` and ``stages``).

    Returns
    -------
    tuple of str
        ``("prior",)`` for a cluster or histogram prior, then ``"stage1"``, ``"stage2"``, ...
    """
    prior = ("prior",) if config.prior in ("cluster", "histogram") else ()
    return prior + tuple(f"stage{t}" for t in range(1, len(config.stages) + 1))


def noisy_histogram_prior(context: MethodContext, members: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The stage-1 prior of ``prior`` cluster or histogram: ``(rows, groups)``, the (groups, K) noisy
    label histograms as distributions (tempered) and each training example's group. The histogram is
    released once, on the labels of ``members`` (default: every training example), who pay
    ``prior_epsilon`` for it; ``cluster`` groups the examples by k-means of public features,
    ``histogram`` has one group of all of them.

    What is released: the (groups, K) label counts of ``members`` per group with discrete Laplace noise
    at ``prior_epsilon`` (:func:`~labeldp.boundary.release.release_noisy_histogram`), with every training
    example's group (public). It is the release ``prior`` of :meth:`MethodContext.spend
    <labeldp.methods.protocol.MethodContext.spend>`: saved, and recorded as one ledger entry tagged
    ``prior`` over ``members``; read back when it was saved.

    Parameters
    ----------
    context : MethodContext
        The run (its configuration: ``prior``, ``encoder``, ``clusters``, ``prior_epsilon``,
        ``prior_temperature``).
    members : numpy.ndarray or None, optional
        The training examples whose labels are counted, and who pay for it; None: all of them.

    Returns
    -------
    tuple of numpy.ndarray
        ``(rows, groups)``: the (groups, K) tempered priors and each training example's group.
    """
    config, data = context.config, context.data
    members = np.arange(len(data.y_train)) if members is None else members

    def draw(ledger: PrivacyLedger) -> Release:
        if config.prior == "histogram":
            groups, num_groups = np.zeros(len(data.y_train), dtype=np.int64), 1
        else:
            features = encode(data.x_train, config.encoder, seed=config.seed, progress=context.progress)
            groups, num_groups = cluster(features, config.clusters, seed=config.seed), config.clusters
        release = release_noisy_histogram(
            ledger,
            data.y_train[members],
            members,
            groups[members],
            num_groups,
            data.num_classes,
            config.prior_epsilon,
            config.noise.generator("histogram"),
            "prior",
        )
        return release.with_arrays(clusters=groups)

    released = context.spend("prior", draw)
    counts, groups = released.arrays["counts"], released.arrays["clusters"]
    rows = histogram_priors(counts, np.bincount(groups[members], minlength=len(counts)))  # sizes: public
    return temper(rows, config.prior_temperature), groups


def cluster_prior_rows(context: MethodContext) -> np.ndarray:
    """Every training example's cluster (or histogram) prior; its noisy histogram is released once, on
    all labels.

    The release is :func:`noisy_histogram_prior`'s (``prior``, recorded on every training example).

    Parameters
    ----------
    context : MethodContext
        The run.

    Returns
    -------
    numpy.ndarray
        (n, K) each training example's prior: its group's row.
    """
    rows, groups = noisy_histogram_prior(context)
    return rows[groups]


def release_stage(
    context: MethodContext, stage: int, members: np.ndarray, model: nn.Module | None, public_prior: np.ndarray | None
) -> Release:
    """Stage ``stage``'s release of its ``members``' labels: true labels (non-private), RR with a
    uniform prior, else RR-with-prior (stage 1: the cluster prior ``public_prior``; later stages:
    ``model``'s prediction, times the cluster prior with ``combine_priors``). Its ``evidence`` is what
    the forward loss trains on.

    What is released: one label per member, its true label (``non-private``) or a noisy one at
    ``label_epsilon`` (``epsilon`` less ``prior_epsilon``) with noise from the stream ``label-release``
    of ``stage``. It is the release ``stage<stage>`` of
    :meth:`MethodContext.spend <labeldp.methods.protocol.MethodContext.spend>`: saved, with the
    members' ``indices`` and their ``evidence``, and recorded as one ledger entry tagged
    ``stage<stage>`` over ``members`` (``NonPrivateDpEvent`` for true labels, which makes the ledger's
    epsilon infinite; randomized response over K; or RR over the smallest k >= 2 drawn, for
    RR-with-prior). Read back, not drawn again, when it was saved.

    Parameters
    ----------
    context : MethodContext
        The run.
    stage : int
        The stage, from 1.
    members : numpy.ndarray
        The stage's training examples (public positions).
    model : torch.nn.Module or None
        The model trained so far, whose prediction is a later stage's prior (unused in stage 1).
    public_prior : numpy.ndarray or None
        (n, K) the released cluster or histogram prior of every training example; None for none.

    Returns
    -------
    Release
        The release; ``arrays["indices"]`` its members, ``arrays["evidence"]`` (m, K) what it tells of
        each label (the channel, times the cluster prior where it is folded in), ``arrays["k"]`` each
        member's k.
    """
    config, data = context.config, context.data
    tag, epsilon = f"stage{stage}", config.label_epsilon
    # the model's prior is public (post-processing of earlier releases): under torchrun every rank
    # predicts its share of it, before rank 0 draws
    model_prior = None
    if stage > 1 and config.method != "non-private" and context.will_draw(tag):
        model_prior = context.predict_proba(model, data.x_train[members], config.temperature)

    def draw(ledger: PrivacyLedger) -> Release:
        true, rng = data.y_train[members], config.noise.generator("label-release", stage)
        if config.method == "non-private":
            release = release_true_labels(ledger, true, members, data.num_classes, tag)
            return release.with_arrays(indices=members, evidence=release.likelihood.astype(np.float32))
        if public_prior is None and stage == 1:
            release = release_randomized_response(ledger, true, members, data.num_classes, epsilon, rng, tag)
            return release.with_arrays(indices=members, evidence=release.likelihood.astype(np.float32))
        # A cluster prior carries label information the model cannot see otherwise; a model prior is
        # the model's own belief, built from labels that are reused anyway.
        fold = public_prior[members] if public_prior is not None and (stage == 1 or config.combine_priors) else None
        if stage == 1:
            prior = public_prior[members]
        else:
            prior = model_prior
            if config.combine_priors:
                prior = release_evidence(fold, prior)
        release = release_rr_with_prior(ledger, true, members, prior, epsilon, rng, tag)
        evidence = release_evidence(fold, release.likelihood)
        return release.with_arrays(indices=members, evidence=evidence.astype(np.float32))

    return context.spend(tag, draw)


def reused(context: MethodContext, stage: int, model: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """Earlier stages' inputs and targets to train on again (post-processing only).

    With the forward loss all of them, each with its own noise channel; with plain cross-entropy
    only those inside the current prior's top k (the paper's filter).

    Parameters
    ----------
    context : MethodContext
        The run.
    stage : int
        The stage about to train (the releases of stages 1 to ``stage - 1`` are reused).
    model : torch.nn.Module
        The model trained so far, whose prediction is the prior of the filter (plain cross-entropy).

    Returns
    -------
    tuple of numpy.ndarray
        ``(indices, targets)``: the earlier examples' positions and their targets (:func:`stage_targets`,
        or the released labels kept by the filter).
    """
    config = context.config
    earlier = [context.saved_release(f"stage{s}") for s in range(1, stage)]
    indices = np.concatenate([e.arrays["indices"] for e in earlier])
    if config.loss in ("forward", "mse"):
        return indices, np.concatenate([stage_targets(context, e) for e in earlier])
    labels = np.concatenate([e.labels for e in earlier])
    prior = context.predict_proba(model, context.data.x_train[indices], config.temperature)
    _, in_top_k = prior_top_k(prior, config.label_epsilon)
    keep = in_top_k[np.arange(indices.size), labels]
    return indices[keep], labels[keep]


def stage_targets(context: MethodContext, released: Release) -> np.ndarray:
    """What a stage trains on: the evidence (forward loss), the released labels (ce), or for numeric
    labels the released labels' values (mse).

    Parameters
    ----------
    context : MethodContext
        The run (its ``loss``).
    released : Release
        A stage's release (:func:`release_stage`).

    Returns
    -------
    numpy.ndarray
        (m, K) evidence, (m,) labels, or (m,) values on the grid.
    """
    if context.config.loss == "forward":
        return released.arrays["evidence"]
    if context.config.loss == "mse":
        return context.data.label_values[released.labels]
    return released.labels


def run_stages(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release and train stage after stage; the last stage's model is the run's.

    The driver of ``non-private``, ``lp-1st``, ``lp-2st`` and ``lp-mst``. What is released, each
    through :meth:`MethodContext.spend <labeldp.methods.protocol.MethodContext.spend>` (saved, and
    recorded as one ledger entry tagged with its name): with a cluster or histogram prior, first the
    noisy histogram ``prior`` over every training example (:func:`noisy_histogram_prior`); then, for
    each stage t, the labels of that stage's examples, ``stage<t>`` (:func:`release_stage`). The stages
    split the training examples (disjoint, from the public seed), so each label is released once by
    its stage. Training on the releases is post-processing.

    Parameters
    ----------
    context : MethodContext
        The run.

    Returns
    -------
    tuple of (torch.nn.Module, dict)
        The last stage's model, and the facts for the summary: ``stages``, per stage the number of
        labels released, the number of earlier ones reused and the mean k.
    """
    config, data = context.config, context.data
    members_by_stage = split_stages(len(data.y_train), config.stages, config.seed, data.train_units)
    # released before any stage
    public_prior = cluster_prior_rows(context) if config.prior in ("cluster", "histogram") else None
    model = context.new_model(1)
    summaries = []
    for stage, members in enumerate(members_by_stage, start=1):
        prior_model = model
        if stage > 1 and not config.warm_start:
            model = context.new_model(stage)
        released = release_stage(context, stage, members, prior_model, public_prior)
        indices = members
        targets = stage_targets(context, released)
        if stage > 1 and config.reuse_labels:
            more_indices, more_targets = reused(context, stage, prior_model)
            indices, targets = np.concatenate([indices, more_indices]), np.concatenate([targets, more_targets])
        # stage 1's evidence under a cluster prior is the prior times the channel: train on its
        # posterior (the forward loss's gradient vanishes where the model is confidently wrong, and
        # with a peaked prior and k = 1 nearly everywhere a class missed early stays missed)
        soft = stage == 1 and public_prior is not None and config.loss == "forward"
        context.train(model, stage, len(members_by_stage), indices, targets, soft_labels=soft)
        summaries.append(
            {
                "stage": stage,
                "released": int(members.size),
                "reused": int(indices.size - members.size),
                "mean_k": float(np.mean(released.arrays["k"])),
            }
        )
    return model, {"stages": summaries}


register_method(
    Method(
        "non-private",
        "true labels (a reference; epsilon infinite)",
        run_stages,
        uses=frozenset({"loss"}),
        private=False,
        independent_of=_FIRST_RELEASES,
        releases=stage_releases,
    )
)
register_method(
    Method(
        "lp-1st",
        "randomized response on every label, one stage",
        run_stages,
        uses=_PRIVATE_OPTIONS | _LABEL_OPTIONS,
        independent_of=_FIRST_RELEASES,
        releases=stage_releases,
    ),
    "rr",
)
register_method(
    Method(
        "lp-2st",
        "two stages; the second releases by RR-with-prior from the first's model",
        run_stages,
        uses=_PRIVATE_OPTIONS | _LABEL_OPTIONS | _MULTI_STAGE_OPTIONS,
        stages=2,
        default_stages=(0.4, 0.6),
        independent_of=_TWO_STAGE_RELEASES,
        releases=stage_releases,
        first_stage_options=_FIRST_STAGE_OPTIONS,
    )
)
register_method(
    Method(
        "lp-mst",
        "any number of stages, each releasing by RR-with-prior from the model so far",
        run_stages,
        uses=_PRIVATE_OPTIONS | _LABEL_OPTIONS | _MULTI_STAGE_OPTIONS,
        stages=None,
        default_stages=(0.3, 0.3, 0.4),
        independent_of=_FIRST_RELEASES,
        releases=stage_releases,
        first_stage_options=_FIRST_STAGE_OPTIONS,
    )
)
