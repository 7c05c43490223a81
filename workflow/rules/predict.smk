# Test-set prediction with the selected model(s), ensembling, postprocessing and evaluation.


rule predict:
    input:
        selection=INFERENCE_INFORMATION,
        checkpoints=fold_checkpoints,
    output:
        directory(CONFIGURATION_PREDICTIONS),
    log:
        LOGS / "predict_{configuration}.log",
    threads: config["training"]["threads"]
    resources:
        gpu=GPUS_PER_JOB,
    params:
        dataset=DATASET,
        roots=ROOT_FLAGS,
        images=RAW / "imagesTs",
        model=MODEL_FLAGS,
        folds=FOLDS_ARGS,
        device=DEVICE,
    shell:
        "OMP_NUM_THREADS={threads} nnunet-core predict -i {params.images} -o {output} "
        "-d {params.dataset} -c {wildcards.configuration} {params.model} -f {params.folds} "
        "--save_probabilities -device {params.device} -npp 0 -nps 0 "
        "--disable_progress_bar {params.roots} > {log} 2>&1"


rule ensemble_predictions:
    input:
        selected_prediction_folders,
    output:
        directory(ENSEMBLE_PREDICTIONS),
    log:
        LOGS / "ensemble_predictions.log",
    params:
        processes=NUM_PROCESSES,
    shell:
        "nnunet-core ensemble -i {input} -o {output} -np {params.processes} > {log} 2>&1"


rule postprocess:
    input:
        predictions=winner_prediction_folder,
        selection=INFERENCE_INFORMATION,
    output:
        directory(FINAL_PREDICTIONS),
    log:
        LOGS / "postprocess.log",
    params:
        steps=postprocessing_file,
        dataset_json=PRE_DATASET_JSON,
        processes=NUM_PROCESSES,
    shell:
        "nnunet-core apply-postprocessing -i {input.predictions} -o {output} "
        "--pp-file {params.steps} -dataset_json {params.dataset_json} "
        "-np {params.processes} > {log} 2>&1"


rule evaluate_test:
    input:
        predictions=FINAL_PREDICTIONS,
        dataset_json=PRE_DATASET_JSON,
    output:
        TEST_SUMMARY,
    log:
        LOGS / "evaluate_test.log",
    params:
        labels=RAW / "labelsTs",
        processes=NUM_PROCESSES,
    shell:
        "nnunet-core evaluate {params.labels} {input.predictions} -djfile {input.dataset_json} "
        "-o {output} -np {params.processes} > {log} 2>&1"
