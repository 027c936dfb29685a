"""The drawing primitives every picture shares: an Agg figure, its pixels, a looping GIF.

matplotlib's object API on the Agg canvas (no pyplot, no global backend
switch), so rendering is safe in headless processes. GIF frames come from a
figure of fixed size and dpi with no tight bounding box, so every frame of a
GIF has the same pixel size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lazylab.paths import write_atomically

MAX_GIF_BYTES = 5 * 1024 * 1024  # every GIF lazylab writes stays under 5 MB


def figure(figsize: tuple[float, float], dpi: int = 100, layout: str | None = None):
    """A matplotlib ``Figure`` of ``figsize`` inches at ``dpi`` on its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def grab(fig) -> np.ndarray:
    """The figure's pixels as RGB uint8 ``(h, w, 3)``."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def write_gif(frames: list[np.ndarray], path: Path, durations_ms: list[int]) -> int:
    """Write RGB frames ``(h, w, 3)`` uint8 as a GIF that loops forever; returns its size in bytes.

    The file is written whole or not at all (``lazylab.paths.write_atomically``).
    Raises: ValueError if the frames differ in shape or the durations do not match them;
    LazylabError (one line) if the file cannot be written.
    """
    import imageio.v3 as iio

    shapes = {f.shape for f in frames}
    if len(shapes) != 1:
        raise ValueError(f"frames differ in size: {sorted(shapes)}")
    if len(durations_ms) != len(frames):
        raise ValueError("one duration per frame is required")
    path = Path(path)
    durations = [int(d) for d in durations_ms]
    stack = np.stack(frames)
    write_atomically(path, lambda tmp: iio.imwrite(tmp, stack, extension=".gif", plugin="pillow",
                                                   duration=durations if len(durations) > 1 else durations[0],
                                                   loop=0), "--out")  # Pillow wants an int for one frame
    return path.stat().st_size


def read_gif(path: Path) -> dict:
    """``{"frames", "sizes" (set of (w, h)), "durations" (ms), "loop", "bytes"}`` of a GIF on disk."""
    from PIL import Image

    path = Path(path)
    sizes, durations = set(), []
    with Image.open(path) as im:
        loop = im.info.get("loop")
        for i in range(im.n_frames):
            im.seek(i)
            sizes.add(im.size)
            durations.append(im.info.get("duration"))
        frames = im.n_frames
    return {"frames": frames, "sizes": sizes, "durations": durations, "loop": loop, "bytes": path.stat().st_size}
