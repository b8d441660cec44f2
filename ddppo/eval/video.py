"""Episode videos for `ddppo eval --video N`: the agent's observation beside a top-down map.

Each recorded episode becomes one file: MP4 (H.264 through imageio-ffmpeg) or,
when no ffmpeg encoder is present, an animated GIF (Pillow). An episode of
length L has L + 1 frames: frame k shows the state the agent saw before its
k-th action (and that action), the last frame shows the final observation and
the episode's metrics. Frames are drawn with matplotlib (Agg), all the same
size (FRAME_SIZE).

What is drawn comes from the env's probe (ddppo/eval/probes.py): a 1-D range scan
(gridnav) is drawn around the agent, depth and RGB images (habitat) as images;
envs without a probe get no map.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from ddppo.eval.probes import EnvProbe, MapView

FRAME_SIZE = (960, 480)  # (width, height) in pixels; multiples of 16 for H.264
_DPI = 100


# ------------------------------------------------------------------------------ frames
@dataclasses.dataclass
class FrameInfo:
    """The text of one frame."""

    title: str  # checkpoint and episode
    status: str  # step, action, running reward, distance
    outcome: str = ""  # final frame: success / SPL ...
    success: bool | None = None


class FrameRenderer:
    """Draws frames of one fixed size: observation panel(s), top-down map, text."""

    def __init__(self, probe: EnvProbe, obs_keys: list[str]):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.probe = probe
        self.image_keys = [k for k in ("rgb", "depth") if k in obs_keys]
        self.scan_key = "depth" if probe.scan() is not None and "depth" in obs_keys else None
        if self.scan_key:
            self.image_keys = [k for k in self.image_keys if k != "depth"]
        self.fig = Figure(figsize=(FRAME_SIZE[0] / _DPI, FRAME_SIZE[1] / _DPI), dpi=_DPI)
        FigureCanvasAgg(self.fig)  # draws off-screen, whatever matplotlib's global backend is
        panels = ([self.scan_key] if self.scan_key else []) + self.image_keys
        n = max(1, len(panels))
        obs_w = 0.46 / n
        self.obs_axes = {k: self.fig.add_axes((0.02 + j * obs_w, 0.14, obs_w - 0.01, 0.70))
                         for j, k in enumerate(panels)}
        self.map_ax = self.fig.add_axes((0.52, 0.14, 0.46, 0.70))
        self.path: list[tuple[float, float]] = []

    def new_episode(self) -> None:
        self.path = []

    def render(self, obs: dict[str, np.ndarray], view: MapView | None, info: FrameInfo,
               move: bool = True) -> np.ndarray:
        """One RGB frame (H, W, 3) uint8. `move=False` keeps the path as it is (final frame)."""
        if view is not None and move:
            self.path.append(view.agent)
        for key, ax in self.obs_axes.items():
            ax.cla()
            if key == self.scan_key:
                self._draw_scan(ax, obs)
            else:
                self._draw_image(ax, key, obs[key], obs)
        self.map_ax.cla()
        if view is not None:
            self._draw_map(self.map_ax, view)
        else:
            self.map_ax.axis("off")
            self.map_ax.text(0.5, 0.5, "no top-down map for this env", ha="center", va="center")
        for t in list(self.fig.texts):
            t.remove()
        self.fig.text(0.02, 0.95, info.title, fontsize=11, va="top", weight="bold")
        self.fig.text(0.02, 0.06, info.status, fontsize=10, va="center", family="monospace")
        if info.outcome:
            color = "tab:green" if info.success else "tab:red"
            self.fig.text(0.98, 0.95, info.outcome, fontsize=11, va="top", ha="right", color=color, weight="bold")
        self.fig.canvas.draw()
        frame = np.asarray(self.fig.canvas.buffer_rgba())[..., :3]
        return np.ascontiguousarray(frame)

    def _draw_scan(self, ax: Any, obs: dict[str, np.ndarray]) -> None:
        angles, max_range = self.probe.scan()
        ranges = np.asarray(obs[self.scan_key], dtype=np.float64).reshape(-1) * max_range
        # egocentric: the agent at the origin facing up; counter-clockwise angles turn left
        xs, ys = -np.sin(angles) * ranges, np.cos(angles) * ranges
        ax.fill(np.append(xs, xs[0]) if len(xs) > 2 else xs, np.append(ys, ys[0]) if len(ys) > 2 else ys,
                color="tab:blue", alpha=0.15)
        for x, y in zip(xs, ys):
            ax.plot([0, x], [0, y], color="tab:blue", lw=0.8, alpha=0.6)
        ax.scatter(xs, ys, s=10, color="tab:blue", zorder=3)
        ax.plot([0], [0], marker="^", markersize=12, color="black", zorder=4)
        goal = self.probe.ego_goal(obs)
        if goal is not None and goal[0] > 0:
            d, a = goal
            r = min(d, max_range * 1.05)
            ax.annotate("", xy=(-math.sin(a) * r, math.cos(a) * r), xytext=(0, 0),
                        arrowprops=dict(arrowstyle="->", color="tab:red", lw=2))
            ax.text(-math.sin(a) * r, math.cos(a) * r, f" goal {d:.1f}", color="tab:red", fontsize=8)
        lim = max_range * 1.15
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("observation: range scan (agent faces up)", fontsize=9)

    def _draw_image(self, ax: Any, key: str, image: np.ndarray, obs: dict[str, np.ndarray]) -> None:
        img = np.asarray(image)
        if key == "depth":
            ax.imshow(img.reshape(img.shape[0], img.shape[1]), cmap="gray", vmin=0.0, vmax=max(1.0, float(img.max())))
        else:
            ax.imshow(img.astype(np.uint8))
        ax.set_xticks([])
        ax.set_yticks([])
        title = f"observation: {key}"
        goal = self.probe.ego_goal(obs)
        if goal is not None:
            title += f"\ngoal {goal[0]:.2f} away, {math.degrees(goal[1]):+.0f} deg from ahead (+ = left)"
        ax.set_title(title, fontsize=9)

    def _draw_map(self, ax: Any, v: MapView) -> None:
        ax.imshow(~v.blocked, cmap="gray", vmin=-0.6, vmax=1.0, extent=v.extent, interpolation="nearest")
        if self.path:
            p = np.asarray(self.path)
            ax.plot(p[:, 0], p[:, 1], color="tab:blue", lw=2, alpha=0.8)
            ax.plot(p[0, 0], p[0, 1], marker="o", color="tab:blue", markersize=7)
        from matplotlib.patches import Circle

        ax.add_patch(Circle(v.goal, max(v.goal_radius, 1e-3), color="tab:red", alpha=0.25))
        ax.plot(*v.goal, marker="*", color="tab:red", markersize=16)
        span = abs(v.extent[1] - v.extent[0])
        ax.arrow(v.agent[0], v.agent[1], v.heading[0] * span * 0.04, v.heading[1] * span * 0.04,
                 width=span * 0.012, color="black", length_includes_head=False, zorder=5)
        ax.set_xlim(v.extent[0], v.extent[1])
        ax.set_ylim(v.extent[2], v.extent[3])
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"top-down map ({v.unit}): start o, path, agent, goal *", fontsize=9)

    def close(self) -> None:
        self.fig.clear()


# ------------------------------------------------------------------------------ files
def ffmpeg_available() -> bool:
    try:
        import imageio_ffmpeg

        return bool(imageio_ffmpeg.get_ffmpeg_exe())
    except Exception:  # not installed, or no binary for this platform
        return False


class _GifWriter:
    def __init__(self, path: Path, fps: int):
        self.path, self.fps, self.frames = path, fps, []

    def append_data(self, frame: np.ndarray) -> None:
        from PIL import Image

        self.frames.append(Image.fromarray(frame))

    def close(self) -> None:
        if self.frames:
            self.frames[0].save(self.path, save_all=True, append_images=self.frames[1:], loop=0,
                                duration=max(1, round(1000 / self.fps)), optimize=False)


def open_video(stem: Path, fps: int) -> tuple[Any, Path]:
    """A frame writer for `stem`.mp4 (ffmpeg) or `stem`.gif (no encoder); (writer, path)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    if ffmpeg_available():
        import imageio.v2 as imageio

        path = stem.with_suffix(".mp4")
        return imageio.get_writer(path, fps=fps, codec="libx264", quality=8, pixelformat="yuv420p",
                                  macro_block_size=16, ffmpeg_log_level="error"), path
    path = stem.with_suffix(".gif")
    return _GifWriter(path, fps), path


# ------------------------------------------------------------------------------ recorder
class EpisodeRecorder:
    """Records the episodes of chosen envs while evaluation steps them.

    `slots[i]` = how many consecutive episodes of env i to record, from its
    first. Call `begin(i, obs)` when env i starts an episode, `before_step(i,
    obs, action)` before each step, `after_step(i, reward)` after it, and
    `end(i, final_obs, metrics, counted)` when the episode ends. Files are
    `<out_stem>-<k>.mp4` (or .gif), k = 0, 1, ... in the order episodes start.
    """

    def __init__(self, probe: EnvProbe, obs_keys: list[str], slots: dict[int, int], out_stem: Path, fps: int,
                 title: str):
        self.probe, self.out_stem, self.fps, self.title = probe, out_stem, fps, title
        self.slots = {i: n for i, n in slots.items() if n > 0}
        self.renderers = {i: FrameRenderer(probe, obs_keys) for i in self.slots}
        self.total = sum(self.slots.values())
        self.done: list[dict[str, Any]] = []
        self._live: dict[int, dict[str, Any]] = {}
        self._started = 0

    @property
    def finished(self) -> bool:
        return len(self.done) >= self.total

    def begin(self, i: int, obs: dict[str, np.ndarray]) -> None:
        if self.slots.get(i, 0) <= 0:
            return
        self.slots[i] -= 1
        k = self._started
        self._started += 1
        writer, path = open_video(self.out_stem.parent / f"{self.out_stem.name}-{k:03d}", self.fps)
        self.renderers[i].new_episode()
        self._live[i] = {"writer": writer, "path": path, "frames": 0, "step": 0, "ret": 0.0, "number": k,
                         "view": None}

    def before_step(self, i: int, obs: dict[str, np.ndarray], action: Any) -> None:
        live = self._live.get(i)
        if live is None:
            return
        names = self.probe.action_names
        a = int(action) if np.ndim(action) == 0 else None
        act = names[a] if a is not None and 0 <= a < len(names) else str(np.round(np.asarray(action), 2).tolist())
        dist = self.probe.distance(i)
        status = f"step {live['step']:3d}   action {act:<12s}   reward so far {live['ret']:+7.2f}"
        if dist is not None:
            status += f"   distance to goal {dist:5.2f}"
        live["view"] = self.probe.map_view(i)
        self._write(i, live, obs, FrameInfo(self._title(live), status), move=True)
        live["step"] += 1

    def after_step(self, i: int, reward: float) -> None:
        if i in self._live:
            self._live[i]["ret"] += float(reward)

    def end(self, i: int, final_obs: dict[str, np.ndarray], metrics: dict[str, float], counted: bool,
            extra: dict[str, Any] | None = None) -> None:
        """The final frame: the last observation, the map as last seen, and the episode's metrics.
        `counted`: whether the episode is one of the evaluated ones; `extra` is added to its entry."""
        live = self._live.pop(i, None)
        if live is None:
            return
        success = bool(metrics["success"]) if "success" in metrics else None
        parts = ["SUCCESS" if success else "FAILED"] if success is not None else []
        parts += [f"{name} {metrics[key]:.2f}" for key, name in (("spl", "SPL"), ("soft_spl", "soft SPL"))
                  if key in metrics]
        status = f"episode over: {live['step']} steps   return {metrics.get('return', live['ret']):+7.2f}"
        if "distance_to_goal" in metrics:
            status += f"   distance to goal {metrics['distance_to_goal']:5.2f}"
        if "collisions" in metrics:
            status += f"   collisions {int(metrics['collisions'])}"
        try:
            self._write(i, live, final_obs, FrameInfo(self._title(live), status, "  ".join(parts), success),
                        move=False)
        finally:
            live["writer"].close()
        self.done.append({"number": live["number"], "path": str(live["path"]), "frames": live["frames"],
                          "counted": counted, **(extra or {}), "metrics": dict(metrics)})
        self.done.sort(key=lambda v: v["number"])

    def _title(self, live: dict[str, Any]) -> str:
        return f"{self.title}   video {live['number'] + 1}/{self.total}"

    def _write(self, i: int, live: dict[str, Any], obs: dict[str, np.ndarray], info: FrameInfo, move: bool) -> None:
        frame = self.renderers[i].render(obs, live["view"], info, move=move)
        live["writer"].append_data(frame)
        live["frames"] += 1

    def close(self) -> None:
        """Close unfinished files (after an error) and free the figures."""
        for live in self._live.values():
            live["writer"].close()
        self._live.clear()
        for r in self.renderers.values():
            r.close()
