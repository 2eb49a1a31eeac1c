#!/usr/bin/env python3
"""Checks the figures `gmprof report OUT --figures DIR` wrote with the HTML report's page in
headless Chromium (scripts/check/check-figures.sh runs it on recorded reports).

    check_figures.py DIR --expect NAME[,NAME...] [--report REPORT.json]

For each expected figure NAME, DIR must hold NAME.svg, NAME.png and NAME.csv, and no other
figure may be there. Each SVG must parse as XML and hold its chart: the title, the caption
line with the run's facts (GPU, mode, grouping, gmprof version; compared with REPORT's meta
when given), the axis names with their units, tick labels, and one bar or point per CSV row
(or a series per CSV column, for the stall mix and the per-GPU bars); ECharts' SVG marks each
drawn data item with ecmeta_series_index and ecmeta_data_index, and a line is one polyline
with a vertex per row. Each PNG must be a valid PNG (chunk CRCs, zlib data, filters) at twice
the SVG's size, and not blank (many colours, between 1 % and 60 % of pixels not white, and
the chart's own colour among them).
Standard library only. Exit status 1 with one line per failure."""

import argparse
import collections
import csv
import json
import re
import struct
import sys
import zlib
from pathlib import Path
from xml.etree import ElementTree

SVG = '{http://www.w3.org/2000/svg}'
TITLES = {
    'steps': 'Time per step',
    'range_time': 'GPU time per range group',
    'dram_bandwidth': 'DRAM bandwidth per range group',
    'dram_bandwidth_kernels': 'DRAM bandwidth per kernel',
    'roofline': 'Roofline of ',
    'stall_mix': 'Stall reasons per range group',
}
CAPTION = re.compile(r'^GPU: (.+) \(chip (.+)\) \u00b7 mode: (\S+) \u00b7 grouped by (\S+) \u00b7 gmprof (\S+)$')
PEAK_RED = '#b3261e'
# A colour each figure's chart draws with (its first series, or the roof), found in the PNG.
INK = {
    'steps': '#19a979',
    'range_time': '#2f6fdf',
    'dram_bandwidth': '#19a979',
    'dram_bandwidth_kernels': '#19a979',
    'roofline': PEAK_RED,
    'stall_mix': '#2f6fdf',
}

failures = []


def fail(name, message):
    failures.append(f'{name}: {message}')


def read_png(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, checked."""
    data = path.read_bytes()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('no PNG signature')
    at, idat, ihdr = 8, [], None
    while at < len(data):
        n, kind = struct.unpack('>I4s', data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack('>I', data[at + 8 + n:at + 12 + n])[0]:
            raise ValueError(f'bad CRC in chunk {kind!r}')
        if kind == b'IHDR':
            ihdr = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
        at += 12 + n
    if ihdr is None or not idat:
        raise ValueError('no IHDR or IDAT chunk')
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace != 0:
        raise ValueError(f'unexpected PNG format {ihdr}')
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(b''.join(idat))
    stride = w * bpp
    if len(raw) != h * (stride + 1):
        raise ValueError(f'{len(raw)} bytes of pixels, not {h * (stride + 1)}')
    prev, rows = bytearray(stride), []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a, b = (line[i - bpp] if i >= bpp else 0), prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise ValueError(f'unknown filter {f} in row {y}')
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_png(name, path, width, height):
    try:
        w, h, bpp, rows = read_png(path)
    except (ValueError, zlib.error, struct.error) as e:
        fail(name, f'{path.name} is not a valid PNG: {e}')
        return
    if (w, h) != (2 * width, 2 * height):
        fail(name, f'{path.name} is {w}x{h}, not twice the SVG\'s {width}x{height}')
    colours, series = collections.Counter(), bytes.fromhex(INK[name][1:])
    for row in rows[::2]:
        for i in range(0, len(row), 2 * bpp):
            colours[row[i:i + 3]] += 1
    sampled = sum(colours.values())
    share = 1 - colours[b'\xff\xff\xff'] / sampled
    if len(colours) < 16 or not 0.01 <= share <= 0.60:
        fail(name, f'{path.name} looks blank or flooded: {len(colours)} colours, {100 * share:.1f} % of pixels not white')
    if colours[series] < 50:
        fail(name, f'{path.name} shows {colours[series]} sampled pixels of the chart\'s colour {INK[name]}')


def texts(root):
    return [''.join(t.itertext()) for t in root.iter(SVG + 'text')]


def drawn_items(root):
    """series index -> set of data indices ECharts drew (ecmeta_ssr_type="chart")."""
    items = collections.defaultdict(set)
    for e in root.iter():
        if e.get('ecmeta_ssr_type') == 'chart':
            items[int(e.get('ecmeta_series_index'))].add(int(e.get('ecmeta_data_index')))
    return items


def polylines(root):
    """Vertex counts of the line series' polylines (not the legend's icons, not grid lines)."""
    out = []
    for p in root.iter(SVG + 'path'):
        if p.get('fill') == 'none' and p.get('stroke-linejoin') == 'bevel' and p.get('transform') is None:
            out.append(len(re.findall(r'[ML]', p.get('d', ''))))
    return out


def check_chart(name, root, words, header, rows):
    n = len(rows)
    items = drawn_items(root)
    if name in ('range_time', 'dram_bandwidth', 'dram_bandwidth_kernels', 'roofline'):
        gpus = [c for c in header if re.fullmatch(r'gpu\d+_ns', c)]
        series = list(range(len(gpus))) if gpus else [0]
        for s in series:
            if items.get(s) != set(range(n)):
                fail(name, f'series {s} draws {len(items.get(s, ()))} items, the CSV has {n} rows')
    if name == 'range_time':
        gpus = [c for c in header if re.fullmatch(r'gpu\d+_ns', c)]
        if gpus and len([s for s in items if s < len(gpus)]) != len(gpus):
            fail(name, f'{len(items)} series for the CSV\'s {len(gpus)} GPUs')
        shares = [t for t in words if re.fullmatch(r'\d+\.\d%', t)]
        if len(shares) != n:
            fail(name, f'{len(shares)} share labels for {n} rows')
    if name.startswith('dram_bandwidth'):
        peak = rows[0][header.index('peak_gbps')] if n else ''
        want = f'peak {float(peak):.0f} GB/s' if peak else None
        if want and want not in words:
            fail(name, f'the peak is not marked ({want!r})')
    if name == 'roofline':
        roofs = [p for p in root.iter(SVG + 'path')
                 if p.get('stroke') == PEAK_RED and p.get('stroke-dasharray') and p.get('transform') is None]
        if len(roofs) != 1:
            fail(name, f'{len(roofs)} roof lines, not 1')
        peak = rows[0][header.index('dram_peak_gbps')] if n else ''
        if peak and not any(t.startswith(f'roof: DRAM peak {float(peak):.0f} GB/s') for t in words):
            fail(name, 'the roof is not named with the DRAM peak')
    if name == 'stall_mix':
        reasons = header[3:]
        if sorted(items) != list(range(len(reasons))):
            fail(name, f'{len(items)} series for the CSV\'s {len(reasons)} stall reasons')
        for j, reason in enumerate(reasons):
            # The chart lists the groups bottom-up: its item k is the CSV's row n - 1 - k.
            want = {n - 1 - i for i, r in enumerate(rows) if r[3 + j] != ''}
            if items.get(j) != want:
                fail(name, f'{reason}: {len(items.get(j, ()))} bar segments, the CSV has {len(want)} values')
        missing = [r for r in reasons if r.removesuffix(' (%)') not in words]
        if missing:
            fail(name, f'no legend entry for {missing}')
    if name == 'steps':
        lines = polylines(root)
        for col in ('wall_max_ns', 'wall_min_ns', 'wall_mean_ns', 'gpu_mean_ns'):
            want = sum(1 for r in rows if r[header.index(col)] != '')
            if want not in lines:
                fail(name, f'no line of {want} points for {col} (lines: {lines})')
        if len(lines) != 4:
            fail(name, f'{len(lines)} lines, not 4 (wall max, min, mean, GPU mean)')
        if not items.get(4):
            fail(name, 'the slowest steps are not marked')


def axis_names(name, header):
    if name == 'roofline':
        flop = 'flop_per_byte' in header
        return ['arithmetic intensity (FLOP/byte)' if flop else 'arithmetic intensity (warp inst/byte)',
                'performance (GFLOP/s)' if flop else 'performance (G warp inst/s)']
    return {
        'steps': ['step', 'time per step (ms)'],
        'range_time': ['GPU time (ms)'],
        'dram_bandwidth': ['DRAM bandwidth, read + write (GB/s)', 'range group'],
        'dram_bandwidth_kernels': ['DRAM bandwidth, read + write (GB/s)', 'kernel'],
        'stall_mix': ['share of PC samples (%)', 'range group'],
    }[name]


def check(name, d, meta):
    svg_path, png_path, csv_path = (d / f'{name}.{ext}' for ext in ('svg', 'png', 'csv'))
    for p in (svg_path, png_path, csv_path):
        if not p.is_file():
            fail(name, f'{p.name} was not written')
            return
    with csv_path.open(newline='') as f:
        table = list(csv.reader(f))
    header, rows = table[0], table[1:]
    if not rows:
        fail(name, f'{csv_path.name} has no rows')
    try:
        root = ElementTree.parse(svg_path).getroot()
    except ElementTree.ParseError as e:
        fail(name, f'{svg_path.name} is not XML: {e}')
        return
    if root.tag != SVG + 'svg':
        fail(name, f'the root element is {root.tag}, not svg')
        return
    width, height = int(root.get('width')), int(root.get('height'))
    words = texts(root)
    if not any(t.startswith(TITLES[name]) for t in words):
        fail(name, f'no title starting {TITLES[name]!r}')
    captions = [m for m in map(CAPTION.match, words) if m]
    if len(captions) != 1:
        fail(name, f'{len(captions)} caption lines, not 1')
    elif meta:
        device, chip, mode, _, version = captions[0].groups()
        want = (meta.get('device_name') or 'unknown', meta['mode'], meta['gmprof_version'])
        if (device, mode, version) != want:
            fail(name, f'the caption says {(device, mode, version)}, the report {want}')
    for axis in axis_names(name, header):
        if axis not in words:
            fail(name, f'no axis name {axis!r}')
    if sum(1 for t in words if re.fullmatch(r'[\d.,]+', t)) < 3:
        fail(name, 'fewer than 3 numeric tick labels')
    check_chart(name, root, words, header, rows)
    check_png(name, png_path, width, height)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('dir', type=Path)
    ap.add_argument('--expect', required=True)
    ap.add_argument('--report', type=Path)
    args = ap.parse_args()
    expected = args.expect.split(',')
    meta = None
    if args.report:
        path = args.report / 'report.json' if args.report.is_dir() else args.report
        if path.suffix == '.json':
            meta = json.loads(path.read_text())['meta']
    found = sorted(p.stem for p in args.dir.glob('*.svg'))
    if found != sorted(expected):
        fail(str(args.dir), f'figures {found}, expected {sorted(expected)}')
    for name in expected:
        check(name, args.dir, meta)
    for f in failures:
        print(f'check-figures: FAIL {f}', file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f'check-figures: ok {args.dir}: {", ".join(expected)} (SVG holds its chart, PNG valid and drawn)')


if __name__ == '__main__':
    main()
