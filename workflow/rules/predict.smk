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
# folder is removed when the job runs again (`staging_folder` in flags.smk), by
# nnunet_core.io.removal, which deletes only inside the run's predictions folder. (Within the
# folder, predict_from_raw_data_args.json names the `.partial` folder that predict wrote.)
# A cascade stage (3d_cascade_fullres) reads its previous stage's test predictions, made by this
# rule for 3d_lowres (also when the selection did not pick 3d_lowres), via -prev_stage_predictions.
# A prediction job predicts on one device: it asks for one GPU whatever a fold's gpus_per_job.
# A local prediction job takes a whole GPU through the fold jobs' slot locks (predict --gpu-slot,
# nnunet_core.cluster.gpu_slots); Snakemake's `gpu` resource only counts.


rule predict:
    input:
        selection=INFERENCE_INFORMATION,
        folds=fold_summaries,
        previous_stage=previous_stage_predictions,
    output:
        directory(CONFIGURATION_PREDICTIONS),
    log:
        LOGS / PREDICT_LOG,
    threads: PREDICT_THREADS
    resources:
        gpu=prediction_gpu_resource(),
        lsf_extra=lsf.rule_lsf_extra(workflow, min(GPUS_PER_JOB, 1), resumable=False),
    params:
        python=sys.executable,
        predictions=PREDICTIONS,
        staging=staging_folder,
        settings=prediction_settings,
        dataset=DATASET,
        roots=ROOT_FLAGS,
        images=TEST_IMAGES,
        model=MODEL_FLAGS,
        consent=MODEL_CODE_CONSENT,
        folds=FOLDS_ARGS,
        device=DEVICE,
        previous_stage=previous_stage_flag,
        slots=prediction_slot_flags(),
    message:
        JOB_WITH_WILDCARDS
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
        selected_prediction_folders,
    output:
        directory(ENSEMBLE_PREDICTIONS),
    log:
        LOGS / "ensemble_predictions.log",
    params:
        python=sys.executable,
        predictions=PREDICTIONS,
        staging=staging_folder,
        processes=NUM_PROCESSES,
    message:
        JOB
    shell:
        "{params.python:q} -m nnunet_core.io.removal --inside {params.predictions:q} "
        "{params.staging:q}\n"
        "nnunet-core ensemble -i {input:q} -o {params.staging:q} -np {params.processes:q} "
        "> {log:q} 2>&1\n"
        "mv {params.staging:q} {output:q}"


rule postprocess:
    input:
        predictions=winner_prediction_folder,
        selection=INFERENCE_INFORMATION,
    output:
        directory(FINAL_PREDICTIONS),
    log:
        LOGS / "postprocess.log",
    params:
        python=sys.executable,
        predictions=PREDICTIONS,
        staging=staging_folder,
        steps=postprocessing_file,
        dataset_json=PRE_DATASET_JSON,
        processes=NUM_PROCESSES,
    message:
        JOB
    shell:
        "{params.python:q} -m nnunet_core.io.removal --inside {params.predictions:q} "
        "{params.staging:q}\n"
        "nnunet-core apply-postprocessing -i {input.predictions:q} -o {params.staging:q} "
        "--pp-file {params.steps:q} -dataset_json {params.dataset_json:q} "
        "-np {params.processes:q} > {log:q} 2>&1\n"
        "mv {params.staging:q} {output:q}"


rule evaluate_test:
    input:
        predictions=FINAL_PREDICTIONS,
        # a copy of the raw dataset.json (verified): every planner of a dataset rewrites it,
        # e.g. a method added with another planner, which must not redo the other tests
        dataset_json=ancient(PRE_DATASET_JSON),
    output:
        TEST_SUMMARY,
    log:
        LOGS / "evaluate_test.log",
    params:
        labels=TEST_LABELS,
        processes=NUM_PROCESSES,
        surface=SURFACE_FLAGS,
    message:
        JOB
    shell:
        "nnunet-core evaluate {params.labels:q} {input.predictions:q} "
        "-djfile {input.dataset_json:q} -o {output:q} -np {params.processes:q} "
        "{params.surface} > {log:q} 2>&1"
