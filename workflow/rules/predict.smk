# Test-set prediction with the selected model(s), ensembling, postprocessing and evaluation.
#
# A rule writing a folder writes it under `<folder>.partial` and renames it when its command has
# succeeded, so the folder exists only complete. `predict` keeps a killed attempt's `.partial`
# folder while its inputs and settings are unchanged (nnunet_core.workflow.resumable_staging)
# and continues it: the cases already written are not predicted again. These jobs come after the `select` checkpoint,
# and Snakemake (9.27) checks its incomplete markers only for the jobs of the first DAG, not for
# those added when a checkpoint's dependencies are updated: a folder left half-written by a killed
# job would count as done on the next run, even with --rerun-incomplete (a test prediction
# missing, found only by evaluate_test where there are test labels). A killed job's `.partial`
# folder is removed when the job runs again (`RUN.staging_folder`), by
# nnunet_core.io.removal, which deletes only inside the run's predictions folder. (Within the
# folder, predict_from_raw_data_args.json names the `.partial` folder that predict wrote.)
# A cascade stage (3d_cascade_fullres) reads its previous stage's test predictions, made by this
# rule for 3d_lowres (also when the selection did not pick 3d_lowres), via -prev_stage_predictions.
# A prediction job predicts on one device: it asks for one GPU whatever a fold's gpus_per_job.
# A local prediction job takes a whole GPU through the fold jobs' slot locks (predict --gpu-slot,
# nnunet_core.cluster.gpu_slots); Snakemake's `gpu` resource only counts.
import sys

from nnunet_core.cluster import lsf
from nnunet_core.layout.work import PREDICT_LOG


rule predict:
    input:
        selection=RUN.paths.inference_information,
        folds=RUN.inputs.fold_summaries,
        previous_stage=RUN.inputs.previous_stage_predictions,
    output:
        directory(RUN.paths.configuration_predictions),
    log:
        RUN.paths.logs / PREDICT_LOG,
    threads: RUN.predict_threads
    resources:
        gpu=RUN.prediction_gpu_resource(),
        lsf_extra=lsf.rule_lsf_extra(
            workflow, min(RUN.gpus_per_job, 1), resumable=False
        ),
    params:
        python=sys.executable,
        predictions=RUN.paths.predictions,
        staging=RUN.staging_folder,
        settings=RUN.prediction_settings,
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        images=RUN.paths.test_images,
        model=RUN.flags.model,
        consent=RUN.flags.model_code_consent,
        folds=RUN.flags.folds,
        device=RUN.device,
        previous_stage=RUN.previous_stage_flag,
        slots=RUN.prediction_slot_flags(),
    message:
        RUN.messages.with_wildcards
    shell:
        "{params.python:q} -m nnunet_core.workflow.resumable_staging prepare --inside "
        "{params.predictions:q} --key {params.settings:q} {params.staging:q} {input:q} "
        "> {log:q} 2>&1\n"
        "OMP_NUM_THREADS={threads} OMP_WAIT_POLICY=${{OMP_WAIT_POLICY:-PASSIVE}} "
        "nnunet-core predict -i {params.images:q} -o {params.staging:q} "
        "-d {params.dataset:q} -c {wildcards.configuration:q} {params.model} {params.consent} "
        "{params.previous_stage}"
        "-f {params.folds} --save_probabilities -device {params.device:q} -npp 0 -nps 0 "
        "--continue_prediction --disable_progress_bar {params.slots}{params.roots} "
        ">> {log:q} 2>&1\n"
        "{params.python:q} -m nnunet_core.workflow.resumable_staging finish --inside "
        "{params.predictions:q} {params.staging:q} {output:q}"


rule ensemble_predictions:
    input:
        RUN.inputs.selected_prediction_folders,
    output:
        directory(RUN.paths.ensemble_predictions),
    log:
        RUN.paths.logs / "ensemble_predictions.log",
    params:
        python=sys.executable,
        predictions=RUN.paths.predictions,
        staging=RUN.staging_folder,
        processes=RUN.processes,
    message:
        RUN.messages.job
    shell:
        "{params.python:q} -m nnunet_core.io.removal --inside {params.predictions:q} "
        "{params.staging:q}\n"
        "nnunet-core ensemble -i {input:q} -o {params.staging:q} -np {params.processes:q} "
        "> {log:q} 2>&1\n"
        "mv {params.staging:q} {output:q}"


rule postprocess:
    input:
        predictions=RUN.inputs.winner_prediction_folder,
        selection=RUN.paths.inference_information,
    output:
        directory(RUN.paths.final_predictions),
    log:
        RUN.paths.logs / "postprocess.log",
    params:
        python=sys.executable,
        predictions=RUN.paths.predictions,
        staging=RUN.staging_folder,
        steps=RUN.inputs.postprocessing_file,
        dataset_json=RUN.paths.pre_dataset_json,
        processes=RUN.processes,
    message:
        RUN.messages.job
    shell:
        "{params.python:q} -m nnunet_core.io.removal --inside {params.predictions:q} "
        "{params.staging:q}\n"
        "nnunet-core apply-postprocessing -i {input.predictions:q} -o {params.staging:q} "
        "--pp-file {params.steps:q} -dataset_json {params.dataset_json:q} "
        "-np {params.processes:q} > {log:q} 2>&1\n"
        "mv {params.staging:q} {output:q}"


rule evaluate_test:
    input:
        predictions=RUN.paths.final_predictions,
        # a copy of the raw dataset.json (verified): every planner of a dataset rewrites it,
        # e.g. a method added with another planner, which must not redo the other tests
        dataset_json=ancient(RUN.paths.pre_dataset_json),
    output:
        RUN.paths.test_summary,
    log:
        RUN.paths.logs / "evaluate_test.log",
    params:
        labels=RUN.paths.test_labels,
        processes=RUN.processes,
        surface=RUN.flags.surface,
    message:
        RUN.messages.job
    shell:
        "nnunet-core evaluate {params.labels:q} {input.predictions:q} "
        "-djfile {input.dataset_json:q} -o {output:q} -np {params.processes:q} "
        "{params.surface} > {log:q} 2>&1"
