"""Raw datasets: discovery, integrity verification and the synthetic demo generator."""
