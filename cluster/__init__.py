"""cluster: Ray cluster definitions as files — the local bootstrap, a cluster-launcher YAML for GPU
clouds, KubeRay RayService/RayJob manifests and Serve config files (validated by tests/cluster).

and the documentation site's builder (documentation.py docs_site: the site is the checkout's, as these files are).

Layer: the bottom; it imports no other esc_eval package."""
from esc_eval.cluster.documentation import docs_site

__all__ = ["docs_site"]
