# Paths: every folder and file of the raw, preprocessed, results and predictions trees that a
# rule declares, and the wildcards they use. Included by common.smk.
from nnunet_core.planning.planner import get_preset

WORK = Path(config["work_dir"])
DATASET = f"Dataset{config['dataset']['id']:03d}_{config['dataset']['name']}"
RAW_ROOT = Path(config["dataset"]["raw_root"] or WORK / "raw")
RAW = RAW_ROOT / DATASET
PRE_ROOT = WORK / "preprocessed"
PRE = PRE_ROOT / DATASET
RESULTS_ROOT = WORK / "results"
LOGS = WORK / "logs" / DATASET
PLANS_NAME = (
    config["planning"]["plans_name"]
    or get_preset(config["planning"]["planner"]).plans_name
)
PLANS = PRE / f"{PLANS_NAME}.json"
MODEL_DIR = RESULTS_ROOT / DATASET / f"{TRAINER}__{PLANS_NAME}__{{configuration}}"
FOLD_DIR = MODEL_DIR / "fold_{fold}"
RESULTS = RESULTS_ROOT / DATASET
REPORT = RESULTS / "report"
PREDICTIONS = WORK / "predictions" / DATASET
FOLDS_TAG = "_".join(str(f) for f in FOLDS)
CROSSVAL_SUMMARY = MODEL_DIR / f"crossval_results_folds_{FOLDS_TAG}" / "summary.json"
ENSEMBLE_CV_DIR = (
    RESULTS
    / "ensembles"
    / (
        f"ensemble___{TRAINER}__{PLANS_NAME}__{{first}}"
        f"___{TRAINER}__{PLANS_NAME}__{{second}}___{FOLDS_TAG}"
    )
)


wildcard_constraints:
    configuration=r"[A-Za-z0-9_]+",
    fold=r"\d+|all",
    first=r"[A-Za-z0-9_]+?",
    second=r"[A-Za-z0-9_]+?",


def model_path(pattern, configuration, fold=None):
    """A path of MODEL_DIR/FOLD_DIR with its wildcards filled in."""
    return str(pattern).format(configuration=configuration, fold=fold)


def crossval_summary(configuration):
    return model_path(CROSSVAL_SUMMARY, configuration)
