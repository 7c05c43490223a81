# The wildcards of the run's paths. The paths themselves are RUN.paths
# (nnunet_core.workflow.run_paths.RunPaths): every folder and file of the raw, preprocessed,
# results and predictions trees that a rule declares, each named by nnunet_core.layout.
# Included by common.smk.
from nnunet_core.layout.predictions import configuration_name_pattern


# A configuration is never `ensemble` or `final`: predictions/D/ensemble is ensemble_predictions'
# output, not one of predict's (whose input functions would fail on it, printed on every run).
wildcard_constraints:
    configuration=configuration_name_pattern(),
    fold=r"\d+|all",
    first=r"[A-Za-z0-9_]+?",
    second=r"[A-Za-z0-9_]+?",
