"""cluster: Ray cluster definitions as files — the local bootstrap, a cluster-launcher YAML for GPU
clouds, KubeRay RayService/RayJob manifests and Serve config files (validated by tests/cluster).

Layer: data only; it imports no other esc_eval package."""

__all__: list[str] = []  # files only: nothing to import
