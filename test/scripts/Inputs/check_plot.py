"""Prints a PNG's width and height and, for each quarter (the 2 x 2 panels of plot_run.py, row by
row), whether more than 100 of its pixels have matplotlib's first line colour (C0, #1f77b4): a
panel with nothing plotted has only axes, ticks and grid."""
import sys

import matplotlib.image

pixels = matplotlib.image.imread(sys.argv[1])[:, :, :3]
h, w = pixels.shape[:2]
line = [31 / 255, 119 / 255, 180 / 255]
near = (abs(pixels[:, :, 0] - line[0]) < 0.08) & (abs(pixels[:, :, 1] - line[1]) < 0.08) & \
       (abs(pixels[:, :, 2] - line[2]) < 0.08)
print(w, h, [int(near[y:y + h // 2, x:x + w // 2].sum()) > 100 for y in (0, h // 2) for x in (0, w // 2)])
