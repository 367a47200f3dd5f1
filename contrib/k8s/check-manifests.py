"""Checks what kubernetes-validate cannot: that kiln's pods reach the GPU as kiln needs.

Usage: python check-manifests.py IMAGE  (run in contrib/k8s; IMAGE is the Dockerfile's)
Every pod that runs kiln uses the nvidia runtime class, has the capabilities Vulkan and
NVML need, mounts /dev/kmsg read-only, and uses IMAGE; the fleet job requests GPUs and
runs one pod per node; the health DaemonSet covers every GPU node and requests none.
"""
import sys

import yaml

image = sys.argv[1]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def docs(name):
    with open(name) as f:
        return {d["kind"]: d for d in yaml.safe_load_all(f) if d}


def env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def kmsg_read_only(spec, container):
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        if m["mountPath"] == "/dev/kmsg":
            host = volumes[m["name"]].get("hostPath", {})
            return m.get("readOnly") is True and host.get("path") == "/dev/kmsg"
    return False


fleet = docs("kiln-cronjob.yaml")["CronJob"]
job = fleet["spec"]["jobTemplate"]["spec"]
pod = job["template"]["spec"]
kiln = next(c for c in pod["containers"] if c["name"] == "kiln")
check(pod.get("runtimeClassName") == "nvidia", "fleet: runtimeClassName nvidia")
check(kiln["image"] == image, f"fleet: image {image}")
limits = kiln["resources"]["limits"]
check(int(limits.get("nvidia.com/gpu", 0)) >= 1, "fleet: requests nvidia.com/gpu")
caps = env(kiln).get("NVIDIA_DRIVER_CAPABILITIES", "").split(",")
check(all(c in caps for c in ("compute", "utility", "graphics")),
      "fleet: NVIDIA_DRIVER_CAPABILITIES has compute, utility and graphics")
check(kmsg_read_only(pod, kiln), "fleet: /dev/kmsg mounted read-only")
check(job.get("completionMode") == "Indexed" and job.get("completions") == job.get("parallelism"),
      "fleet: an indexed job, every pod at once")
anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
check(any(t["topologyKey"] == "kubernetes.io/hostname"
          and t["labelSelector"]["matchLabels"].items() <= job["template"]["metadata"]["labels"].items()
          for t in anti), "fleet: one pod per node (required anti-affinity on the host name)")
args = " ".join(kiln.get("args", []) + kiln.get("command", []))
check("--profile fleet" in args and "--textfile-dir" in args,
      "fleet: kiln run --profile fleet --textfile-dir")
check(env(kiln).get("NODE_NAME") is None and any(e["name"] == "NODE_NAME" for e in kiln["env"]),
      "fleet: NODE_NAME from the pod's node")

npd = docs("kiln-npd.yaml")
ds = npd["DaemonSet"]["spec"]["template"]["spec"]
detector = next(c for c in ds["containers"] if c["name"] == "node-problem-detector")
init = next(c for c in ds["initContainers"] if c["name"] == "kiln")
check(ds.get("runtimeClassName") == "nvidia", "npd: runtimeClassName nvidia (NVML reachable)")
e = env(detector)
check(e.get("NVIDIA_VISIBLE_DEVICES") == "all" and "utility" in e.get("NVIDIA_DRIVER_CAPABILITIES", ""),
      "npd: every GPU visible with the utility capability (NVML)")
check("nvidia.com/gpu" not in detector.get("resources", {}).get("limits", {}),
      "npd: takes no GPU away from jobs")
check("--textfile-dir" in e.get("KILN_HEALTH_ARGS", ""), "npd: kiln health writes its metrics")
check(kmsg_read_only(ds, detector), "npd: /dev/kmsg mounted read-only")
check(init["image"] == image, f"npd: kiln image {image}")
check(ds.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true",
      "npd: on every GPU node")

sys.exit(1 if failures else 0)
