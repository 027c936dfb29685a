"""The limits of the command line's values, shared by its options (``lazylab.cli.options``, which
re-exports them) and by the schemas of the files lazylab reads back (``lazylab.schemas``).

A module of its own, importing nothing: ``lazylab.data`` checks its parsed copy with
``lazylab.schemas``, and the backends import ``lazylab.data``, so the schemas must not import
``lazylab.cli`` (which imports the experiments, which import the backends: tests/test_imports.py).
For the same reason the two values the schemas check that belong to ``lazylab.data`` and
``lazylab.calibration`` live here (those modules re-export them): the schemas import neither module,
which both read their files with the schemas (no import circle).
"""

MAX_SEED = 2**32 - 1  # jax keys hold 32 bits: a larger seed would silently repeat a smaller one
MAX_LR = 1e6  # far past every divergence; larger rates overflow float32 updates to inf
MAX_WIDTH = 65536  # 8x the protocol's widest bank; beyond this the features alone outgrow a workstation
MAX_AMPLITUDE = 1e6  # ntk lab's --bump and --noise: far past any useful target; 1e308 overflows its float64 squares
MAX_LIST = 100_000  # values in one list option: far past any sweep, small enough to check at once
NAME_MAX = 255  # bytes in one path component on Linux file systems (ext4, xfs, btrfs, tmpfs)
MAX_EPOCHS = 1000  # --epochs: far past the protocol's 12
MIN_TRAIN_SIZE, MAX_TRAIN_SIZE = 256, 60000  # --train-size: one batch at least, the whole training set at most

# Ranges only one command's options have (lazylab.cli.studies, lazylab.cli.ntk).
GRAM_MAX_SEED = 1_000_000  # gram --seed: its reference banks take the seeds above (experiments.gram_config)
GRAM_MAX_REPEATS = 64  # gram --repeats: repeat seeds seed + r stay below the reference seeds (seed + 1) * 4096
GRAM_MAX_FRAMES = 500  # gram --frames
GRAM_MIN_PER_CLASS, GRAM_MAX_PER_CLASS = 2, 200  # gram --per-class
GRAM_MAX_REF_UNITS = 10_000_000  # gram --ref-units
READOUT_MAX_STEPS = 100_000  # readout --steps
NTK_W0 = (1e-4, 10.0)  # ntk scalar --w0
NTK_DT = (1e-5, 0.01)  # ntk scalar --dt

# Values of lazylab.data and lazylab.calibration (re-exported there) that the schemas check.
CLASS_NAMES = (  # Fashion-MNIST's classes, by index: gram/readout --classes (lazylab.data.CLASS_NAMES)
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
CALIBRATION_VERSION = 2  # bump when what the calibration measures changes (lazylab.calibration.CALIBRATION_VERSION)
