# Paths: every folder and file of the raw, preprocessed, results and predictions trees that a
# rule declares, and the wildcards they use. Included by common.smk. Every name comes from
# nnunet_core.layout (one module per tree), the modules the commands write with, so a declared
# output and the file a command writes cannot differ ("{configuration}", "{fold}", "{first}"
# and "{second}" pass through them as wildcards).
from nnunet_core.layout.predictions import (
    ENSEMBLE_PREDICTIONS_FOLDER,
    FINAL_PREDICTIONS_FOLDER,
    configuration_name_pattern,
    configuration_predictions_dir,
    winner_predictions_dir,
)
from nnunet_core.layout.preprocessed import (
    FINGERPRINT_JSON,
    SPLITS_JSON,
    VERIFY_JSON,
    plans_file,
    preprocess_summary_file,
)
from nnunet_core.layout.raw import (
    DATASET_JSON,
    TRAINING_FOLDERS,
    images_ts_dir,
    labels_ts_dir,
)
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    REPORT_PAGE_MD,
    SUMMARY_JSON,
    TrainedModel,
    crossval_dir,
    ensemble_name,
    ensembles_dir,
    fold_dir,
    inference_information_file,
    inference_instructions_file,
    report_dir,
    trained_model_dir,
    validation_dir,
)
from nnunet_core.layout.roots import (
    preprocessed_dataset_dir,
    raw_dataset_dir,
    results_dataset_dir,
)
from nnunet_core.layout.work import (
    PREDICT_LOG,
    REPRODUCE_ARCHIVE,
    TRAIN_LOG,
    staging_folder_of,
)
from nnunet_core.planning.presets import get_preset
from nnunet_core.workflow.pretrained import resolve_pretrained_weights
from nnunet_core.workflow.runs import RunTree

WORK = Path(config["work_dir"])
# One dataset and one seed: upstream's trees under work_dir; with several seeds (paper.smk) the
# seed's results, predictions and logs are under seed_<n> (nnunet_core.workflow.runs).
TREE = RunTree.of_config(config)
DATASET = TREE.dataset
ROOTS = TREE.roots
RAW_ROOT = ROOTS.raw
RAW = raw_dataset_dir(ROOTS, DATASET)
PRE_ROOT = ROOTS.preprocessed
PRE = preprocessed_dataset_dir(ROOTS, DATASET)
RESULTS_ROOT = ROOTS.results
RESULTS = results_dataset_dir(ROOTS, DATASET)
LOGS = TREE.logs
# Logs of the jobs up to preprocessing, shared by the dataset's seeds.
DATASET_LOGS = TREE.dataset_logs
PLANS_NAME = (
    config["planning"]["plans_name"]
    or get_preset(config["planning"]["planner"]).plans_name
)
RAW_DATASET_JSON = RAW / DATASET_JSON
TEST_IMAGES = images_ts_dir(RAW)
TEST_LABELS = labels_ts_dir(RAW)
VERIFY = PRE / VERIFY_JSON
FINGERPRINT = PRE / FINGERPRINT_JSON
SPLITS = PRE / SPLITS_JSON
PRE_DATASET_JSON = PRE / DATASET_JSON
DECLARES_DATASET_JSON = config.get("method", {}).get("writes_dataset_json", True)
PLANS = plans_file(PRE, PLANS_NAME)
MODEL_DIR = trained_model_dir(RESULTS, "{configuration}", PLANS_NAME, TRAINER)
FOLD_DIR = fold_dir(MODEL_DIR, "{fold}")
FINAL_CHECKPOINT = FOLD_DIR / CHECKPOINT_FINAL
FOLD_SUMMARY = validation_dir(FOLD_DIR) / SUMMARY_JSON
CROSSVAL_SUMMARY = crossval_dir(MODEL_DIR, FOLDS) / SUMMARY_JSON
ENSEMBLE_CV_SUMMARY = (
    ensembles_dir(RESULTS)
    / ensemble_name(
        [
            TrainedModel(member, PLANS_NAME, TRAINER)
            for member in ("{first}", "{second}")
        ],
        FOLDS,
    )
    / SUMMARY_JSON
)
INFERENCE_INFORMATION = inference_information_file(RESULTS)
INFERENCE_INSTRUCTIONS = inference_instructions_file(RESULTS)
REPORT = report_dir(RESULTS)
REPORT_PAGE = REPORT / REPORT_PAGE_MD
PREDICTIONS = TREE.predictions_dir
CONFIGURATION_PREDICTIONS = configuration_predictions_dir(
    PREDICTIONS, "{configuration}"
)
ENSEMBLE_PREDICTIONS = PREDICTIONS / ENSEMBLE_PREDICTIONS_FOLDER
FINAL_PREDICTIONS = PREDICTIONS / FINAL_PREDICTIONS_FOLDER
TEST_SUMMARY = TREE.test_summary
# training.pretrained_weights: the checkpoint every fold's first attempt starts from (None:
# fresh); from a model zip it is extracted into work_dir/pretrained (rule
# extract_pretrained_weights). Checked by common.smk's check_config before this line.
PRETRAINED = resolve_pretrained_weights(config["training"]["pretrained_weights"], WORK)


# A configuration is never `ensemble` or `final`: predictions/D/ensemble is ensemble_predictions'
# output, not one of predict's (whose input functions would fail on it, printed on every run).
wildcard_constraints:
    configuration=configuration_name_pattern(),
    fold=r"\d+|all",
    first=r"[A-Za-z0-9_]+?",
    second=r"[A-Za-z0-9_]+?",
