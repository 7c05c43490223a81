# blosc2 preprocessing, one job per data identifier (configurations sharing data run once).
# Before any fold: a preprocess job takes all its `threads`, so behind a running fold job it
# would wait for a whole free machine while a core idles (and its configuration's folds with it).
from nnunet_core.layout.preprocessed import preprocess_summary_file


rule preprocess:
    input:
        verified=RUN.paths.verify,
        plans=RUN.paths.plans,
    output:
        preprocess_summary_file(RUN.paths.pre, "{data_identifier}"),
    log:
        RUN.paths.dataset_logs / "preprocess_{data_identifier}.log",
    # the data of this run's planner only: a method with another planner preprocesses its own
    wildcard_constraints:
        data_identifier=RUN.data_identifier_pattern(),
    priority: 10
    threads: RUN.processes
    params:
        dataset=RUN.dataset,
        roots=RUN.flags.roots,
        plans_name=RUN.plans_name,
        configuration=RUN.inputs.configuration_of_identifier,
    message:
        RUN.messages.with_wildcards
    shell:
        "nnunet-core preprocess -d {params.dataset:q} {params.roots} "
        "-c {params.configuration:q} --plans-name {params.plans_name:q} -np {threads} "
        "> {log:q} 2>&1"
