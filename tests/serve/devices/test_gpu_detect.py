"""GPU detection (serve/devices/gpus.py) against a fake nvidia-smi on PATH, a fake NVML module, the
driver's /proc folders and Ray's resources; CUDA_VISIBLE_DEVICES as CUDA reads it."""
from __future__ import annotations

import pytest

from esc_eval.serve.devices import gpus as gpu_detect
from esc_eval.serve.devices.gpus import Gpu, detect_gpus, ray_inventory, visible

H100 = ("NVIDIA H100 80GB HBM3", 81559)  # what nvidia-smi prints for one (MiB)


class FakeNvml:
    """The part of pynvml detection calls, over a list of (name, uuid, bytes)."""

    def __init__(self, gpus, fail_init=False):
        self.gpus, self.fail_init, self.shut = gpus, fail_init, False

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.gpus[h][0].encode()  # older pynvml returns bytes

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h][1]

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("Mem", (), {"total": self.gpus[h][2]})()

    def nvmlShutdown(self):
        self.shut = True


def test_nvidia_smi_on_path_is_read_when_nvml_is_absent(fake_gpus):
    fake_gpus(H100, ("NVIDIA A10G", 23028))
    found = detect_gpus()
    assert found.source == "nvidia-smi" and found.count == 2
    assert [g.name for g in found.gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA A10G"]
    assert found.gpus[0].memory_gb == pytest.approx(85.5, abs=0.05)  # 81,559 MiB in GB
    assert found.memory_gb == pytest.approx(24.1, abs=0.05)  # the smallest: a plan must fit it
    assert found.accelerator_type == "H100" and found.gpus[1].uuid.startswith("GPU-00000001")


def test_nvml_wins_and_a_failing_nvml_falls_back(fake_gpus):
    fake_gpus(H100)
    nvml = FakeNvml([("NVIDIA L40S", "GPU-abc", 48_000_000_000)])
    found = detect_gpus(nvml=nvml)
    assert (found.source, found.count, found.gpus[0].name, found.gpus[0].memory_gb) == ("nvml", 1, "NVIDIA L40S", 48.0)
    assert nvml.shut and found.accelerator_type == "L40S"  # not "L4"
    assert detect_gpus(nvml=FakeNvml([], fail_init=True)).source == "nvidia-smi"


def test_no_gpu_anywhere(fake_gpus):
    fake_gpus()  # nvidia-smi answers "No devices were found", exit 6
    found = detect_gpus()
    assert found.count == 0 and found.memory_gb is None and found.describe() == "no GPU found on this machine"


def test_the_drivers_proc_folders_give_a_count_and_a_type(fake_gpus, tmp_path):
    proc = tmp_path / "gpus"
    for bus in ("0000:3b:00.0", "0000:5e:00.0"):
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text("Model: \t\t NVIDIA A10G\nGPU UUID: \t GPU-1234\n")
    found = detect_gpus(proc=proc, run=lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError("nvidia-smi")))
    assert (found.source, found.count, found.accelerator_type, found.memory_gb) == ("driver", 2, "A10G", 24.0)


GPUS = [Gpu(0, "GPU-aaaa-1111", "NVIDIA H100", 85.5), Gpu(1, "GPU-bbbb-2222", "NVIDIA H100", 85.5)]


@pytest.mark.parametrize("value, indices, noted", [
    (None, [0, 1], False),
    ("", [], False),  # empty: none
    ("1", [1], False),
    ("1,0", [1, 0], False),  # CUDA's order: the first listed is device 0
    ("GPU-bbbb", [1], False),  # a unique UUID prefix
    ("GPU-", [], True),  # ambiguous prefix: names none
    ("0,7,1", [0], True),  # CUDA stops at the first entry naming no GPU
    ("NoDevFiles", [], True),
    ("MIG-1f2e3d4c-aaaa-bbbb-cccc-0123456789ab", [0, 1], True),  # MIG: not read here, said so
])
def test_cuda_visible_devices(value, indices, noted):
    kept, notes = visible(GPUS, value)
    assert [g.index for g in kept] == indices and bool(notes) == noted


def test_cuda_visible_devices_applies_to_what_is_found(fake_gpus, monkeypatch):
    fake_gpus(H100, H100)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    found = detect_gpus()
    assert found.count == 1 and found.gpus[0].index == 1 and "leaves 1 of 2" in found.notes[0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_gpus().count == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    bad = detect_gpus()
    assert bad.count == 0 and "'3' names no GPU of this machine (indices 0, 1)" in bad.notes[0]


def test_ray_cluster_resources():
    found = ray_inventory({"GPU": 8.0, "CPU": 64.0, "accelerator_type:H100": 2.0},
                          [{"Alive": True, "Resources": {"GPU": 4.0}}, {"Alive": True, "Resources": {"GPU": 4.0}},
                           {"Alive": False, "Resources": {"GPU": 8.0}}, {"Alive": True, "Resources": {"CPU": 8.0}}])
    assert (found.count, found.per_node, found.accelerator_type, found.memory_gb, found.where) == (
        8, 4, "H100", 80.0, "the Ray cluster")
    assert ray_inventory({"CPU": 4.0}).count == 0


def test_the_nvidia_smi_query_is_the_documented_one():
    assert gpu_detect.SMI_QUERY == ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total",
                                    "--format=csv,noheader,nounits"]
