"""Raw datasets: discovery, integrity verification, the synthetic demo generator and real-size
synthetic CT-like and MR-like datasets."""
