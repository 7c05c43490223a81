"""Predict with a model folder: ``nnunet-core predict-from-modelfolder -i IN -o OUT -m FOLDER``.

Upstream's ``nnUNetv2_predict_from_modelfolder``: ``predict`` with ``-m`` required, so no
``nnUNet_*`` variable is needed; ``-d``/``-c`` are refused. It is ``predict``'s own parser pieces
and run function (``nnunet_core.commands.predict``); ``-num_parts``/``-part_id`` and
``--fp16_accumulation`` come along from there (upstream's command has no ``-num_parts``). A
cascade model folder without ``-prev_stage_predictions`` predicts its previous stage first from
the sibling folder ``<trainer>__<plans>__<previous stage>``. A folder of a user's trainer carries
its code (``trainer_source/*.py``), which runs only with ``--trust-model-code``.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands import predict
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.results import DEFAULT_TRAINER


def configure_parser(parser: argparse.ArgumentParser) -> None:
    predict.add_io_flags(parser)
    parser.add_argument(
        "-m",
        dest="model_folder",
        required=True,
        help="the trained model folder (with plans.json, dataset.json and fold_X/)",
    )
    predict.add_prediction_flags(parser)
    # predict's model-naming flags, hidden: given, predict refuses -d/-c beside -m in one line
    # (unregistered, argparse would read -c as the prefix of -chk and -d as that of -device)
    hidden = argparse.SUPPRESS
    parser.add_argument("-d", "--dataset", default=None, help=hidden)
    parser.add_argument("-c", dest="configuration", default=None, help=hidden)
    parser.add_argument("-p", dest="plans", default=DEFAULT_PLANS_NAME, help=hidden)
    parser.add_argument("-tr", dest="trainer", default=DEFAULT_TRAINER, help=hidden)


def run(args: argparse.Namespace) -> int:
    return predict.run(args)
