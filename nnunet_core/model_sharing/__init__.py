"""Model archives that upstream nnU-Net reads and writes (``nnUNetv2_export_model_to_zip`` and
``nnUNetv2_install_pretrained_model_from_zip``): a zip whose member names are paths relative to
the results root, so installing is unpacking into that root."""
