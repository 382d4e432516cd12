"""The options several commands take, each declared once (:class:`~labeldp.options.Option`): a command
that means something of its own by one adds its words here, under ``commands``.

``"train"`` is also ``labeldp tune``'s (the run's options); the configuration fields that carry these
(``RunConfig``, ``TrainConfig``, ``HashedConfig``) declare them with :func:`~labeldp.options.declared`.
"""

from __future__ import annotations

from labeldp.models.names import MODELS, described_rule
from labeldp.options import Option
from labeldp.tables.table_batches import DEFAULT_BATCH_ROWS

# the defaults of options shared with the ads route are stated here, beside their declarations
#: the ads route's rows read, hashed and trained on at a time: they bound the memory
DEFAULT_BLOCK_ROWS = 1 << 18
#: the ridge penalty on marginals' bins' coefficients, in units of the summed log-likelihood: the noise on a
#: bin's count does not shrink with the number of rows, so neither does the penalty that tames it
DEFAULT_L2 = 100.0
#: the ads route's models: logistic regression over the buckets, a factorization machine (rr and the noisy
#: source only: the likelihood of counts is the logistic model's)
HASHED_MODELS = ("lr", "fm")
#: the ads route's training settings of each model and route where the user leaves them (None)
ROUTE_TRAINING = {
    "lr": {"epochs": 2, "lr": 0.1},
    "fm": {"epochs": 2, "lr": 0.05},
    "counts": {"epochs": 1, "lr": 0.05},
}

PRIORS = ("uniform", "histogram", "cluster")
#: where the test metrics of held-out rows of the private label column come from (``test_labels``)
TEST_LABELS = ("released", "public", "none")


def _by_fit(name: str) -> str:
    return ", ".join(f"{value[name]} for {fit}" for fit, value in ROUTE_TRAINING.items())


TABLE = Option(
    "a CSV or Parquet table",
    type="str | None",
    flag="--table",
    metavar="PATH",
    commands={
        "train": {"help": "dataset csv, relative to --data-dir if given"},
        "privatize": {"help": "a file or a folder of them (read in sorted order)"},
        "predict": {"help": "with the run's feature columns"},
        "hashed train": {"help": "Parquet only: a file or a folder of impressions"},
        "hashed predict": {"help": "Parquet only: a file or a folder of the rows to score"},
    },
)
DATA_DIR = Option(
    "folder of the dataset's standard files",
    type="str | None",
    flag="--data-dir",
    commands={
        "train": {"help": "csv: of a relative --table"},
        "sweep": {
            "help": "of every run whose dataset reads one (MNIST family, CIFAR, MovieLens), and of every "
            "table named by a relative path (the table profiles')"
        },
        "download": {"help": "where they are saved"},
    },
)
LABEL_COLUMN = Option(
    "the column of --table holding the private labels",
    "label",
    type="str",
    flag="--label-column",
    metavar="COL",
    commands={"hashed train": {"help": "or a source's reported ones", "default": None}},
)
ID_COLUMN = Option(
    "a public row identifier, never a feature",
    type="str | None",
    flag="--id-column",
    metavar="COL",
    commands={
        "train": {"help": "dataset csv (labeldp predict writes it beside the scores)"},
        "privatize": {
            "help": "one distinct value per row, written next to each released label (a duplicated id "
            "is an error before anything is released); default: none, each row's position in the "
            "table (from 0) is written as the column 'row'"
        },
        "predict": {"help": "a column of --table written beside the scores"},
        "hashed predict": {"help": "a column copied next to each probability"},
    },
)
CLASSES = Option(
    "the label values, in order (the label domain is public and must be declared; a label outside it is an "
    "error before anything is released)",
    type="tuple[str, ...] | None",
    flag="--classes",
    metavar="VALUE",
    commands={"train": {"help": "dataset csv"}, "hashed train": {"help": "two, the positive second", "nargs": 2}},
)
ONE_ROW_PER_PERSON = Option(
    "state that no person has two rows, so that a folder of several files can be read without --id-column or "
    "--privacy-unit (a row held in two files would otherwise be released twice)",
    False,
    flag="--one-row-per-person",
    commands={"train": {"help": "dataset csv"}},
)
EPSILON = Option(
    "privacy budget epsilon (> 0)",
    type="float | None",
    flag="--epsilon",
    commands={
        "train": {"help": "required for private methods"},
        "privatize": {"help": "of each label; with --privacy-unit, of each unit's labels together"},
        "hashed train": {"help": "per privacy unit, of --route counts or rr"},
    },
)
PRIVACY_UNIT = Option(
    "the column of each row's privacy unit (a user id; public, never a feature): --epsilon is each unit's, "
    "its labels protected together",
    type="str | None",
    flag="--privacy-unit",
    metavar="COLUMN",
    commands={
        "train": {
            "help": "dataset csv; needs --max-rows-per-unit. The test rows held out are whole units; not "
            "with --method dp-sgd, nor pate above one row per unit"
        },
        "privatize": {"help": "needs --max-rows-per-unit"},
        "hashed train": {"help": "default: each row is its own unit"},
    },
)
DATASET_NAME = Option(
    "the name of the group of people whose labels these are, shared by every release of them whatever the file "
    "is called or holds (the name of PrivateLabels(..., dataset=NAME)); default: the column naming the people "
    "(--privacy-unit, --id-column), else the table's label column, columns and rows",
    type="str | None",
    flag="--dataset-name",
    metavar="NAME",
)
MAX_ROWS_PER_UNIT = Option(
    "with --privacy-unit, the most rows of one unit released: a larger unit's other rows are left out, chosen "
    "by the public --seed (never by a label); every release gives a row epsilon / c, c = M or the largest "
    "unit's rows if fewer",
    type="int | None",
    flag="--max-rows-per-unit",
    metavar="M",
    commands={"train": {"help": "to keep every row, give the largest unit's row count"}},
)
SEED = Option(
    "the public seed (never the noise's)",
    0,
    type="int",
    flag="--seed",
    commands={
        "train": {"help": "it fixes everything that is not private: splits, initialisation, data order, augmentation"},
        "privatize": {"help": "it chooses the rows kept of a unit larger than --max-rows-per-unit"},
        "hashed train": {"help": "it chooses the rows a unit keeps and the order of training"},
        "audit": {"help": "it chooses the canaries"},
    },
)
SECURE_RNG = Option(
    "draw the noise from ChaCha20 keyed by the OS, a cryptographically secure generator (default: generators "
    "seeded with fresh OS entropy, never saved)",
    False,
    flag="--secure-rng",
    commands={"train": {"help": "noisy labels, histograms, PATE's vote noise, DP-SGD's batches and gradient noise"}},
)
INSECURE_NOISE_SEED = Option(
    "NOT PRIVATE: derive all the noise from SEED, which the run or release records (config.json, release.json), "
    "so it can be repeated exactly (for tests and debugging; anyone with the record can regenerate the noise "
    "and undo it)",
    type="int | None",
    flag="--insecure-noise-seed",
    metavar="SEED",
)
PRIOR = Option(
    "the prior of RR-with-prior",
    type="str | None",
    flag="--prior",
    choices=PRIORS,
    commands={
        "train": {
            "help": "stage 1's: uniform (plain RR; the default, except for rr-on-bins and rr-on-bins-mst), "
            "histogram (a noisy histogram of the training labels, stage 1's for rr-on-bins-mst, bought with "
            "--prior-epsilon; their default) or cluster: k-means of public features of the inputs with a "
            "noisy label histogram per cluster"
        },
        "privatize": {
            "help": "one shared by every row: a probability per class",
            "type": "tuple[float, ...] | None",
            "choices": None,
            "metavar": "P",
        },
    },
)
TEST_TABLE = Option(
    "a separate test table, public",
    type="str | None",
    flag="--test-table",
    metavar="PATH",
    commands={
        "train": {"help": "default: 20% of --table's rows, whose labels are private: see --test-labels"},
        "hashed train": {
            "help": "Parquet, with the hashed columns and the label column, scored at the end (AUC, "
            "log-loss); default: the rr and source routes estimate them from the released labels of "
            "the rows trained on"
        },
    },
)
MODEL = Option(
    "the model trained",
    type="str | None",
    flag="--model",
    commands={
        "train": {"help": f"the network (default: {described_rule()})", "choices": MODELS},
        "hashed train": {
            "help": "lr: logistic regression over the buckets; fm: a factorization machine",
            "choices": HASHED_MODELS,
            "default": "lr",
        },
    },
)
EPOCHS = Option(
    "passes over the training set",
    10,
    type="int | None",
    flag="--epochs",
    commands={
        "train": {"help": "each stage's"},
        "hashed train": {"help": f"default: {_by_fit('epochs')}; counts and reports use counts'", "default": None},
    },
)
LR = Option(
    "learning rate",
    0.05,
    type="float | None",
    flag="--lr",
    commands={
        "train": {"help": "the schedule's peak"},
        "hashed train": {"help": f"Adagrad's (default: {_by_fit('lr')})", "default": None},
    },
)
L2 = Option(
    "ridge penalty",
    DEFAULT_L2,
    type="float",
    flag="--l2",
    commands={
        "train": {
            "help": "on marginals' bins' coefficients, in units of the summed log-likelihood (it acts after "
            "the release)"
        },
        "hashed train": {
            "help": "on the summed loss, spread over each bucket's rows (under rr divided by "
            "(2 p - 1)^2, p the probability a label is kept)",
            "default": 10.0,
        },
    },
)
BATCH_ROWS = Option(
    "rows handled at a time",
    DEFAULT_BATCH_ROWS,
    type="int",
    flag="--batch-rows",
    commands={
        "privatize": {"help": "drawn and written; they bound the memory"},
        "hashed train": {"help": "of each training step", "default": 8192},
    },
)
BLOCK_ROWS = Option(
    "rows read at a time (they bound the memory)",
    DEFAULT_BLOCK_ROWS,
    type="int",
    flag="--block-rows",
    commands={"hashed train": {"help": "hashed and trained on"}},
)
OUT = Option(
    "what the command writes",
    type="str | None",
    flag="--out",
    commands={
        "train": {"help": "the run directory (created, or resumed if it exists)"},
        "tune": {"help": "the tune folder (the final run's folder; resumed if it exists)"},
        "sweep": {"help": "the sweep folder"},
        "predict": {"help": "the scores file, .csv or .parquet"},
        "privatize": {"help": "the release folder to create"},
        "hashed train": {"help": "the run folder to create"},
        "hashed predict": {"help": "the Parquet file of probabilities to write", "metavar": "FILE"},
        "demo": {
            "help": "the folder of the demo's run directories (default: a new one named by the date and time, "
            "so that each demo draws its noise afresh; a folder of an earlier demo shows its saved runs)"
        },
    },
)
RECIPES = Option(
    "Python file to execute first: it registers profiles, methods or datasets of your own",
    type="str | None",
    flag="--recipes",
    metavar="FILE",
)
NO_RECIPE = Option(
    "ignore the dataset's recipes: the options not typed take the library's defaults, as on a dataset of your "
    "own (to check what labeldp does on data nobody tuned for: benchmarks/unseen.py)",
    False,
    flag="--no-recipe",
    commands={"train": {"help": "the learning rate is then chosen on the run's own release (--tune-budget)"}},
)
DEVICE = Option(
    "torch device: auto (GPU if present), cpu, cuda, cuda:1",
    "auto",
    type="str",
    flag="--device",
    commands={"sweep": {"help": "of every run"}},
)
THREADS = Option(
    "CPU threads of torch (default: 1 for tables and the embedded digits, whose small models run faster on one; "
    "else the cores free when the run starts, re-checked during training, so that a busy machine's other "
    "processes keep theirs; at most OMP_NUM_THREADS where it is set)",
    type="int | None",
    flag="--threads",
    metavar="N",
    commands={"sweep": {"help": "in each run, each worker taking its share of the free cores"}},
)
QUIET = Option(
    "no progress bars or per-epoch lines",
    False,
    flag="--quiet",
    commands={"sweep": {"help": "nor a line per finished run"}},
)
BUDGET_DIR = Option(
    "the folder of the per-dataset ledgers, which compose every release of a dataset's labels across runs "
    "(default: $LABELDP_BUDGET_DIR, else ~/.local/share/labeldp/budget)",
    type="str | None",
    flag="--budget-dir",
    metavar="DIR",
)
TOTAL_EPSILON = Option(
    "refuse, before anything is drawn, a release that would take its dataset's composed epsilon past E",
    type="float | None",
    flag="--total-epsilon",
    metavar="E",
)
GRID = Option(
    "every combination of NAME=V1,V2 (options of the run, its training, DP-SGD, PATE or marginals)",
    type="tuple[str, ...] | None",
    flag="--grid",
    metavar="NAME=V1,V2",
    commands={
        "sweep": {"help": "one run each: e.g. method=lp-1st,lp-2st epsilon=1,2,4 seed=0,1"},
        "tune": {"help": "one candidate each: e.g. lr=0.01,0.03 epochs=10,20"},
    },
)
