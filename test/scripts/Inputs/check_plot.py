"""Prints a PNG's width and height and, for each cell of plot_run.py's 2 columns (argv[2] rows,
default 2; row by row), whether more than 100 of its pixels have matplotlib's first line colour
(C0, #1f77b4): a panel with nothing plotted has only axes, ticks and grid. With a third argument,
also whether more than a tenth of each cell is saturated colour (a heatmap drawn there)."""
import sys

import matplotlib.image

pixels = matplotlib.image.imread(sys.argv[1])[:, :, :3]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 2
h, w = pixels.shape[:2]
line = [31 / 255, 119 / 255, 180 / 255]
near = (abs(pixels[:, :, 0] - line[0]) < 0.08) & (abs(pixels[:, :, 1] - line[1]) < 0.08) & \
       (abs(pixels[:, :, 2] - line[2]) < 0.08)
cells = [(y * h // rows, (y + 1) * h // rows, x, x + w // 2) for y in range(rows) for x in (0, w // 2)]
print(w, h, [int(near[y0:y1, x0:x1].sum()) > 100 for y0, y1, x0, x1 in cells])
if len(sys.argv) > 3:
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.2
    print([int(coloured[y0:y1, x0:x1].sum()) > (y1 - y0) * (x1 - x0) // 10 for y0, y1, x0, x1 in cells])
