"""The prediction mode (config ``predict:``): segment new scans with a trained model."""
