"""The label-DP stages of Ghazi et al. (2021): ``non-private``, ``lp-1st`` (alias ``rr``), ``lp-2st``, ``lp-mst``.

Stage 1 releases its labels by RR (under a uniform, histogram or cluster prior) or, under a uniform prior,
as VLP's vectors (:func:`first_release_of`); stage t by RR-with-prior from the model trained so far. The
losses and priors are described in docs/methods.md.

Privacy: every label is randomised exactly once, by an epsilon-DP mechanism whose prior does not
depend on it (a histogram released beforehand, paid with ``prior_epsilon`` out of epsilon, or a model
trained on *other* examples' noisy labels): epsilon-label-DP by parallel composition, which the
ledger computes from what was released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.rounding import format_epsilon
from labeldp.boundary import Release, release_noisy_histogram, release_true_labels
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.data.splits import split_stages
from labeldp.errors import ConfigError
from labeldp.mechanisms import prior_top_k, rr_information, vector_information
from labeldp.methods.protocol import MethodContext
from labeldp.methods.stage_release import release_stage_labels
from labeldp.priors import cluster, encode, histogram_priors, release_evidence, temper

#: The settings of the training: the releases drawn before any model trains (stage 1's labels, the cluster
#: histogram) do not depend on them, nor on the options of the training (their ``free_of``).
TRAINING = ("train", "model")
FIRST_RELEASES = {"stage1": TRAINING, "prior": TRAINING}
#: LP-2ST's second release is drawn with the prior of the first stage's model, before the second stage
#: trains: it does not depend on how that stage trains (whether it reuses stage 1's labels, whether it
#: starts from the first model). Later stages of LP-MST do (through the models before them).
_TWO_STAGE_RELEASES = {**FIRST_RELEASES, "stage2": ("reuse_labels", "warm_start", "consensus")}
#: What shapes the first stage's model: how it trains. (The multi-stage options act from stage 2 on.)
_FIRST_STAGE_OPTIONS = ("train", "model", "loss")


def check_stage_options(config) -> None:
    """Consensus retraining is for classes: a numeric label's squared error has no predicted label to agree. VLP's
    vectors are no labels: they train by the forward loss, under no prior, and leave consensus nothing to agree."""
    check_combined_priors(config)
    if config.options.consensus and config.options.loss == "mse":
        raise ConfigError("--consensus retrains on agreeing class labels; it does not apply with --loss mse")
    if getattr(config.options, "first_release", "rr") == "vlp":
        refused = [
            flag
            for flag, given in (
                ("--loss " + config.options.loss, config.options.loss != "forward"),
                ("--prior " + str(config.prior), config.prior not in (None, "uniform")),
                ("--consensus", config.options.consensus),
            )
            if given
        ]
        if refused:
            raise ConfigError(
                f"--first-release vlp releases vectors, not labels: it trains by the forward loss under no prior "
                f"and has no label to retrain on; leave out {', '.join(refused)}"
            )


def check_combined_priors(config) -> None:
    """Refuse ``combine_priors`` without a prior of public features to combine."""
    if getattr(config.options, "combine_priors", False) and config.prior == "uniform":
        raise ConfigError("combine_priors applies only with prior 'cluster' or 'histogram'")


def first_release_of(config, num_classes: int) -> str:
    """Stage 1's release as the run takes it, ``rr`` or ``vlp``: ``first_release``, where ``auto`` (of lp-2st,
    lp-mst) takes VLP's vectors if one tells more of a class than RR's label (I(Y; Z) for a uniform Y:
    :func:`vector_information`, :func:`rr_information`) and the run trains on them (classes, the forward loss,
    no prior, no consensus). The other methods release by RR.

    Public: it reads the declared number of classes and the settings, never a label.
    """
    if not hasattr(config.options, "first_release"):
        return "rr"
    if config.options.first_release != "auto":
        return config.options.first_release
    epsilon = config.label_epsilon
    vectors = config.options.loss == "forward" and config.prior in (None, "uniform") and not config.options.consensus
    vectors = vectors and config.label_range is None  # a numeric label's error is not a class's information
    more = vectors and vector_information(num_classes, epsilon) > rr_information(num_classes, epsilon)
    return "vlp" if more else "rr"


def _first_release_on(config, num_classes: int) -> tuple[dict[str, Any], str | None]:
    """``Method.on_data`` of lp-2st and lp-mst: the first release as the run takes it, and what ``auto`` chose."""
    taken = first_release_of(config, num_classes)
    if config.options.first_release != "auto" or taken != "vlp":
        return {"first_release": taken}, None
    epsilon = config.label_epsilon
    bits = vector_information(num_classes, epsilon), rr_information(num_classes, epsilon)
    return {"first_release": taken}, (
        f"first release: VLP's vectors (--first-release auto: one tells {bits[0]:.3f} bits of a label of "
        f"{num_classes} classes at epsilon {format_epsilon(epsilon)}, RR's label {bits[1]:.3f})"
    )


def stage_releases(config) -> tuple[str, ...]:
    """The releases of a staged run: ``prior`` for a cluster or histogram prior, then ``stage1``, ``stage2``..."""
    prior = ("prior",) if config.prior in ("cluster", "histogram") else ()
    return prior + tuple(f"stage{t}" for t in range(1, len(config.stages) + 1))


def noisy_histogram_prior(context: MethodContext, members: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The stage-1 histogram prior ``(rows, groups)``: (groups, K) tempered rows and each training example's group.

    ``cluster`` groups by k-means of public features, ``histogram`` has one group. The release ``prior``
    (:func:`~labeldp.boundary.release.release_noisy_histogram` through
    :meth:`~labeldp.methods.protocol.MethodContext.spend`) is ``prior_epsilon``-label-DP for ``members``
    (default: every training example), who pay for it.
    """
    config, data = context.config, context.data
    members = np.arange(len(data.y_train)) if members is None else members

    def draw(ledger: PrivacyLedger) -> Release:
        prior_epsilon = config.prior_epsilon
        assert prior_epsilon is not None, "a resolved configuration with a histogram prior has its prior_epsilon"
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
            prior_epsilon,
            config.noise.generator("histogram"),
            "prior",
        )
        return release.with_arrays(clusters=groups)

    released = context.spend("prior", draw)
    counts, groups = released.arrays["counts"], released.arrays["clusters"]
    rows = histogram_priors(counts, np.bincount(groups[members], minlength=len(counts)))  # sizes: public
    return temper(rows, config.prior_temperature), groups


def cluster_prior_rows(context: MethodContext) -> np.ndarray:
    """Every training example's (n, K) cluster or histogram prior (:func:`noisy_histogram_prior` on all labels)."""
    rows, groups = noisy_histogram_prior(context)
    return rows[groups]


def release_stage(
    context: MethodContext, stage: int, members: np.ndarray, model: nn.Module, public_prior: np.ndarray | None
) -> Release:
    """Stage ``stage``'s release ``stage<stage>`` of its ``members``' labels, with the forward loss's ``evidence``.

    True labels (``non-private``: the ledger's epsilon becomes infinite), RR with a uniform prior, else
    RR-with-prior: stage 1 under ``public_prior`` (n, K), later stages under ``model``'s prediction (times
    the cluster prior with ``combine_priors``). Each member's label is released once at ``label_epsilon``
    by :func:`~labeldp.methods.stage_release.release_stage_labels`, through
    :meth:`~labeldp.methods.protocol.MethodContext.spend`. ``arrays`` hold ``indices``, ``evidence`` (m,
    K) and ``k``.
    """
    config, data = context.config, context.data
    tag, epsilon = f"stage{stage}", config.label_epsilon
    # the model's prior is public (post-processing of earlier releases): under torchrun every rank
    # predicts its share of it, before rank 0 draws
    model_prior = None
    if stage > 1 and config.method != "non-private" and context.will_draw(tag):
        model_prior = context.predict_proba(model, data.x_train[members], config.options.temperature)

    def draw(ledger: PrivacyLedger) -> Release:
        true = data.y_train[members]
        if config.method == "non-private":
            release = release_true_labels(ledger, true, members, data.num_classes, tag)
            return release.with_arrays(indices=members, evidence=_channel(release).astype(np.float32))
        assert epsilon is not None, "a resolved configuration of a private method has its epsilon"
        if public_prior is None and stage == 1:
            vectors = first_release_of(config, data.num_classes) == "vlp"
            release = release_stage_labels(
                ledger, true, members, data.num_classes, epsilon, config.noise, stage, vectors=vectors
            )
            return release.with_arrays(indices=members, evidence=_channel(release).astype(np.float32))
        # A cluster prior carries label information the model cannot see otherwise; a model prior is
        # the model's own belief, built from labels that are reused anyway.
        combined = stage == 1 or config.options.combine_priors
        fold = public_prior[members] if public_prior is not None and combined else None
        if stage == 1:
            assert public_prior is not None  # the uniform prior's stage 1 returned above
            prior = public_prior[members]
        else:
            assert model_prior is not None  # predicted above for every private draw after stage 1
            prior = model_prior
            if config.options.combine_priors:
                prior = release_evidence(fold, prior)
        release = release_stage_labels(ledger, true, members, data.num_classes, epsilon, config.noise, stage, prior)
        evidence = release_evidence(fold, _channel(release))
        return release.with_arrays(indices=members, evidence=evidence.astype(np.float32))

    return context.spend(tag, draw)


def _channel(release: Release) -> np.ndarray:
    """The noise channel of a label release (every ``release_*`` function a stage calls computes it)."""
    assert release.likelihood is not None
    return release.likelihood


def stage_releases_before(context: MethodContext, stage: int) -> tuple[list[Release], np.ndarray, np.ndarray | None]:
    """The saved releases of the stages before ``stage``, their members' positions and released labels (None
    where a stage released vectors, not labels)."""
    releases = [context.saved_release(f"stage{s}") for s in range(1, stage)]
    labels = [release.labels for release in releases if release.labels is not None]
    indices = np.concatenate([r.arrays["indices"] for r in releases])
    return releases, indices, np.concatenate(labels) if len(labels) == len(releases) else None


def reused(context: MethodContext, stage: int, model: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """Earlier stages' ``(indices, targets)`` to train on again (post-processing).

    All of them with the forward loss; with plain cross-entropy only those inside ``model``'s current
    prior's top k (the paper's filter).
    """
    config = context.config
    earlier, indices, labels = stage_releases_before(context, stage)
    if config.options.loss in ("forward", "mse"):
        return indices, np.concatenate([stage_targets(context, e) for e in earlier])
    prior = context.predict_proba(model, context.data.x_train[indices], config.options.temperature)
    epsilon = config.label_epsilon
    assert epsilon is not None, "only private methods have a second stage"
    _, in_top_k = prior_top_k(prior, epsilon)
    assert labels is not None, "plain cross-entropy is refused where a stage released vectors"
    keep = in_top_k[np.arange(indices.size), labels]
    return indices[keep], labels[keep]


def stage_targets(context: MethodContext, released: Release) -> np.ndarray:
    """What a stage trains on: the evidence (forward), the released labels (ce), or their values (mse)."""
    if context.config.options.loss == "forward":
        return released.arrays["evidence"]
    labels = released.labels
    assert labels is not None, "a stage's release holds one label per member"
    if context.config.options.loss == "mse":
        values = context.data.label_values
        assert values is not None, "the mse loss is for labels with values"
        return values[labels]
    return labels


def run_stages(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release and train stage after stage (the driver of the methods here); the last stage's model is the run's.

    The stages split the training examples (disjoint, from the public seed), so each label is released
    once: the histogram ``prior`` first where there is one (:func:`noisy_histogram_prior`), then
    ``stage<t>`` per stage (:func:`release_stage`). Training is post-processing.
    """
    config, data = context.config, context.data
    assert config.stages is not None, "a resolved configuration has its stages"
    members_by_stage = split_stages(len(data.y_train), config.stages, config.seed, data.train_units)
    # released before any stage
    public_prior = cluster_prior_rows(context) if config.prior in ("cluster", "histogram") else None
    model = context.new_model(1)
    summaries = []
    for stage, members in enumerate(members_by_stage, start=1):
        prior_model = model
        if stage > 1 and not config.options.warm_start:
            model = context.new_model(stage)
        released = release_stage(context, stage, members, prior_model, public_prior)
        indices = members
        targets = stage_targets(context, released)
        if stage > 1 and config.options.reuse_labels:
            more_indices, more_targets = reused(context, stage, prior_model)
            indices, targets = np.concatenate([indices, more_indices]), np.concatenate([targets, more_targets])
        # stage 1's evidence under a cluster prior is the prior times the channel: train on its
        # posterior (the forward loss's gradient vanishes where the model is confidently wrong, and
        # with a peaked prior and k = 1 nearly everywhere a class missed early stays missed)
        soft = stage == 1 and public_prior is not None and config.options.loss == "forward"
        context.train(model, stage, len(members_by_stage), indices, targets, soft_labels=soft)
        summaries.append(
            {
                "stage": stage,
                "released": int(members.size),
                "reused": int(indices.size - members.size),
                "mean_k": float(np.mean(released.arrays["k"])),
            }
        )
    if not getattr(config.options, "consensus", False):  # (non-private does not retrain)
        return model, {"stages": summaries}
    model, kept = consensus_retrain(context, model, len(members_by_stage))
    return model, {"stages": summaries, "consensus": kept}


def consensus_retrain(context: MethodContext, model: nn.Module, stages: int) -> tuple[nn.Module, dict[str, int]]:
    """A new model trained on the released examples whose label ``model`` predicts (Das et al., "Retraining
    with predicted hard labels provably increases model accuracy", ICML 2025), by cross-entropy on those
    labels; the model and ``{"kept", "released"}``.

    Post-processing of the releases: it reads no private label and spends nothing.
    """
    _, indices, labels = stage_releases_before(context, stages + 1)
    assert labels is not None, "consensus is refused where a stage released vectors"
    predicted = context.predict_proba(model, context.data.x_train[indices]).argmax(axis=1)
    agree = predicted == labels
    retrained = context.new_model(stages + 1)
    context.train(retrained, stages + 1, stages + 1, indices[agree], labels[agree], description="consensus retraining")
    return retrained, {"kept": int(agree.sum()), "released": int(indices.size)}


register_method(
    Method(
        "non-private",
        BUILTIN_HELP["non-private"],
        run_stages,
        private=False,
        independent_of=FIRST_RELEASES,
        releases=stage_releases,
    )
)
register_method(
    Method(
        "lp-1st",
        BUILTIN_HELP["lp-1st"],
        run_stages,
        takes_prior=True,
        independent_of=FIRST_RELEASES,
        check=check_stage_options,
        releases=stage_releases,
    ),
    "rr",
)
register_method(
    Method(
        "lp-2st",
        BUILTIN_HELP["lp-2st"],
        run_stages,
        takes_prior=True,
        stages=2,
        default_stages=(0.4, 0.6),
        independent_of=_TWO_STAGE_RELEASES,
        check=check_stage_options,
        releases=stage_releases,
        first_stage_options=_FIRST_STAGE_OPTIONS,
        on_data=_first_release_on,
    )
)
register_method(
    Method(
        "lp-mst",
        BUILTIN_HELP["lp-mst"],
        run_stages,
        takes_prior=True,
        stages=None,
        default_stages=(0.3, 0.3, 0.4),
        independent_of=FIRST_RELEASES,
        check=check_stage_options,
        releases=stage_releases,
        first_stage_options=_FIRST_STAGE_OPTIONS,
        on_data=_first_release_on,
    )
)
