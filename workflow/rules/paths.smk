# Paths: every folder and file of the raw, preprocessed, results and predictions trees that a
# rule declares, and the wildcards they use. Included by common.smk. Every name comes from
# nnunet_core.layout.paths and nnunet_core.layout.results_tree, the modules the commands write with, so a
# declared output and the file a command writes cannot differ ("{configuration}", "{fold}",
# "{first}" and "{second}" pass through them as wildcards).
from nnunet_core.layout import paths, results_tree
from nnunet_core.planning.planner import get_preset
from nnunet_core.workflow.pretrained import resolve_pretrained_weights
from nnunet_core.workflow.runs import RunTree

WORK = Path(config["work_dir"])
# One dataset and one seed: upstream's trees under work_dir; with several seeds (paper.smk) the
# seed's results, predictions and logs are under seed_<n> (nnunet_core.workflow.runs).
TREE = RunTree.of_config(config)
DATASET = TREE.dataset
ROOTS = TREE.roots
RAW_ROOT = ROOTS.raw
RAW = paths.raw_dataset_dir(ROOTS, DATASET)
PRE_ROOT = ROOTS.preprocessed
PRE = paths.preprocessed_dataset_dir(ROOTS, DATASET)
RESULTS_ROOT = ROOTS.results
RESULTS = paths.results_dataset_dir(ROOTS, DATASET)
LOGS = TREE.logs
# Logs of the jobs up to preprocessing, shared by the dataset's seeds.
DATASET_LOGS = TREE.dataset_logs
PLANS_NAME = (
    config["planning"]["plans_name"]
    or get_preset(config["planning"]["planner"]).plans_name
)
RAW_DATASET_JSON = RAW / paths.DATASET_JSON
VERIFY = PRE / paths.VERIFY_JSON
FINGERPRINT = PRE / paths.FINGERPRINT_JSON
SPLITS = PRE / paths.SPLITS_JSON
PRE_DATASET_JSON = PRE / paths.DATASET_JSON
PLANS = paths.plans_file(PRE, PLANS_NAME)
MODEL_DIR = results_tree.trained_model_dir(
    RESULTS, "{configuration}", PLANS_NAME, TRAINER
)
FOLD_DIR = results_tree.fold_dir(MODEL_DIR, "{fold}")
FINAL_CHECKPOINT = FOLD_DIR / results_tree.CHECKPOINT_FINAL
FOLD_SUMMARY = results_tree.validation_dir(FOLD_DIR) / results_tree.SUMMARY_JSON
CROSSVAL_SUMMARY = (
    results_tree.crossval_dir(MODEL_DIR, FOLDS) / results_tree.SUMMARY_JSON
)
ENSEMBLE_CV_SUMMARY = (
    results_tree.ensembles_dir(RESULTS)
    / results_tree.ensemble_name(
        [
            results_tree.TrainedModel(member, PLANS_NAME, TRAINER)
            for member in ("{first}", "{second}")
        ],
        FOLDS,
    )
    / results_tree.SUMMARY_JSON
)
INFERENCE_INFORMATION = results_tree.inference_information_file(RESULTS)
INFERENCE_INSTRUCTIONS = results_tree.inference_instructions_file(RESULTS)
REPORT = results_tree.report_dir(RESULTS)
REPORT_PAGE = REPORT / results_tree.REPORT_PAGE_MD
PREDICTIONS = TREE.predictions_dir
CONFIGURATION_PREDICTIONS = results_tree.configuration_predictions_dir(
    PREDICTIONS, "{configuration}"
)
ENSEMBLE_PREDICTIONS = PREDICTIONS / results_tree.ENSEMBLE_PREDICTIONS_FOLDER
FINAL_PREDICTIONS = PREDICTIONS / results_tree.FINAL_PREDICTIONS_FOLDER
TEST_SUMMARY = TREE.test_summary
# training.pretrained_weights: the checkpoint every fold's first attempt starts from (None:
# fresh); from a model zip it is extracted into work_dir/pretrained (rule
# extract_pretrained_weights). Checked by common.smk's check_config before this line.
PRETRAINED = resolve_pretrained_weights(config["training"]["pretrained_weights"], WORK)


wildcard_constraints:
    configuration=r"[A-Za-z0-9_]+",
    fold=r"\d+|all",
    first=r"[A-Za-z0-9_]+?",
    second=r"[A-Za-z0-9_]+?",
