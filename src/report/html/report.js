/* gmprof HTML report: draws the data gmprof embedded in #gmprof-data with ECharts.
   Values that were not measured are null: shown as an em dash and left out of plots. Opened
   as report.html#figures, it draws the charts that are figures alone (figures.js). */
(function () {
  'use strict';
  var BLANK = '\u2014';
  var data = JSON.parse(document.getElementById('gmprof-data').textContent);
  var meta = data.meta;
  var charts = [];

  var ui = window.gmprofUi;
  var el = ui.el, known = ui.known, fmtDur = ui.fmtDur, fmtNum = ui.fmtNum, fmtPct = ui.fmtPct, fmtG = ui.fmtG;
  var kernelLabel = ui.kernelLabel, shorten = ui.shorten, table = ui.table;
  var chart = ui.chartsInto(charts), empty = ui.empty;
  var palette = ['#2f6fdf', '#e8743b', '#19a979', '#945ecf', '#ed4a7b', '#13a4b4', '#c9a227', '#6c8893', '#bf399e', '#3f8f29'];
  /* For stacks of up to 20 series (stall reasons), so that no two share a colour. */
  var palette20 = palette.concat(['#8c564b', '#17becf', '#1f3b73', '#bcbd22', '#f2a7b5', '#5e3c99', '#a0522d', '#66c2a5', '#fdb863', '#7f7f7f']);
  function colorOf(text) {
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) >>> 0;
    return palette[h % palette.length];
  }

  /* Header. */
  function header() {
    document.getElementById('title').textContent = 'gmprof report \u00b7 ' + meta.device + ' (chip ' + meta.chip + ')';
    var facts = [
      ['mode', meta.mode], ['time source', meta.time_source], ['kernels', String(meta.kernel_count)],
      ['GPU time', fmtDur(meta.total_gpu_time_ns)],
      ['DRAM peak', known(meta.dram_peak_gbps) ? meta.dram_peak_gbps.toFixed(0) + ' GB/s' : BLANK],
      ['FP32 peak', known(meta.fp32_peak_gflops) ? (meta.fp32_peak_gflops / 1e3).toFixed(1) + ' TFLOP/s' : BLANK],
      ['dropped counter ranges', String(meta.dropped_counter_ranges)],
      ['dropped activity records', String(meta.dropped_activity_records)],
      ['flagged kernel rows', String(meta.flagged_kernel_rows)],
      ['gmprof', meta.version]
    ];
    var box = document.getElementById('facts');
    facts.forEach(function (f) {
      var span = el('span');
      span.appendChild(document.createTextNode(f[0] + ' '));
      span.appendChild(el('b', {}, f[1]));
      box.appendChild(span);
    });
    if (meta.warnings.length) {
      var d = el('details');
      d.appendChild(el('summary', { 'class': 'bad' }, meta.warnings.length + ' warning(s)'));
      var ul = el('ul');
      meta.warnings.forEach(function (w) { ul.appendChild(el('li', {}, w)); });
      d.appendChild(ul);
      document.getElementById('warnings').appendChild(d);
    }
    document.getElementById('summary').textContent = data.summary_text;
  }

  /* Timeline overview: one rectangle per slice on its lane. */
  function timeline() {
    var t = data.timeline;
    if (!t.items.length) { empty('timeline', 'No range, kernel or transfer has timestamps.'); return; }
    var note = 'Ranges per thread and nesting depth; kernels and transfers per GPU stream. Drag or scroll to zoom.';
    if (meta.placement_note) note += ' In this mode ' + meta.placement_note + '.';
    if (t.left_out > 0) note += ' ' + t.left_out + ' later slices are left out of this overview.';
    document.getElementById('timeline-note').textContent = note;
    var kindName = ['range', 'kernel', 'transfer'];
    var items = t.items.map(function (it) {
      var name = t.names[it[3]];
      var color = it[4] === 0 ? palette[it[0] % palette.length] : (it[4] === 1 ? colorOf(name) : '#8a94a6');
      return { value: [it[0], it[1], it[1] + Math.max(it[2], 0), it[2], it[4], it[3]], itemStyle: { color: color } };
    });
    // Open on the ranges (kernels before the first range, e.g. at start-up, stay reachable by zooming out).
    var window0 = Infinity, window1 = -Infinity;
    t.items.forEach(function (it) {
      if (it[4] === 0) { window0 = Math.min(window0, it[1]); window1 = Math.max(window1, it[1] + it[2]); }
    });
    if (!isFinite(window0)) {
      t.items.forEach(function (it) { window0 = Math.min(window0, it[1]); window1 = Math.max(window1, it[1] + it[2]); });
    }
    var pad = (window1 - window0) * 0.02;
    window0 -= pad; window1 += pad;
    var c = chart('timeline');
    c.setOption({
      animation: false,
      tooltip: {
        formatter: function (p) {
          var v = p.value;
          var name = v[4] === 1 ? kernelLabel(t.names[v[5]], 90) : t.names[v[5]];
          return kindName[v[4]] + ': ' + name.replace(/[<>&]/g, '') + '<br>at ' + (v[1] / 1e3).toFixed(3) + ' ms, ' + fmtDur(v[3] * 1e3);
        }
      },
      grid: { left: 170, right: 24, top: 16, bottom: 64 },
      dataZoom: [
        { type: 'slider', filterMode: 'weakFilter', bottom: 12, startValue: window0, endValue: window1, labelFormatter: function (v) { return (v / 1e3).toFixed(1) + ' ms'; } },
        { type: 'inside', filterMode: 'weakFilter', startValue: window0, endValue: window1 }
      ],
      xAxis: { type: 'value', name: 'ms', scale: true, axisLabel: { formatter: function (v) { return (v / 1e3).toFixed(1); } } },
      yAxis: { type: 'category', data: t.lanes, inverse: true, axisLabel: { fontSize: 11 } },
      series: [{
        type: 'custom',
        // Drawn in one frame: above ECharts' threshold (3000 items) a custom series renders
        // progressively, frame by frame, which never ended under headless Chromium's virtual
        // time (a 4803-kernel nanoGPT report hung scripts/check-html.sh); the overview holds
        // at most MAX_TIMELINE_ITEMS (data.rs) items.
        progressive: 0,
        encode: { x: [1, 2], y: 0 },
        data: items,
        renderItem: function (params, api) {
          var lane = api.value(0);
          var start = api.coord([api.value(1), lane]);
          var end = api.coord([api.value(2), lane]);
          var height = api.size([0, 1])[1] * 0.7;
          var rect = echarts.graphic.clipRectByRect(
            { x: start[0], y: start[1] - height / 2, width: Math.max(end[0] - start[0], 0.5), height: height },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height });
          return rect && { type: 'rect', transition: [], shape: rect, style: api.style() };
        }
      }]
    });
  }

  /* PM sampling: each sampled metric over time (GB/s on the left axis, % on the right). */
  function pmChart() {
    var pm = data.pm;
    if (!pm) return;
    document.getElementById('pm-section').hidden = false;
    document.getElementById('pm-note').textContent = pm.note;
    var rate = function (i) { return pm.units[i] === 'byte/second'; };
    var series = pm.metrics.map(function (name, i) {
      var scale = rate(i) ? 1e-9 : 1;
      return {
        name: name, type: 'line', showSymbol: false, step: 'middle', yAxisIndex: rate(i) ? 0 : 1,
        lineStyle: { width: 1.2 }, color: palette[i % palette.length],
        data: pm.t.map(function (t, j) { var v = pm.values[i][j]; return [t, known(v) ? v * scale : null]; })
      };
    });
    var c = chart('pm');
    c.setOption({
      animation: false,
      legend: { type: 'scroll', top: 0 },
      tooltip: { trigger: 'axis', valueFormatter: function (v) { return known(v) ? v.toFixed(1) : BLANK; } },
      grid: { left: 70, right: 60, top: 36, bottom: 64 },
      dataZoom: [{ type: 'slider', bottom: 12, labelFormatter: function (v) { return (v / 1e3).toFixed(1) + ' ms'; } }, { type: 'inside' }],
      xAxis: { type: 'value', name: 'ms', scale: true, axisLabel: { formatter: function (v) { return (v / 1e3).toFixed(1); } } },
      yAxis: [{ type: 'value', name: 'GB/s' }, { type: 'value', name: '%', max: 100 }],
      series: series
    });
  }

  /* Each chart that is also a figure (`gmprof report OUT --figures DIR`) is made by a function
     returning its spec: { name, title, axes: { x, y } (names with units), legend (the figure
     shows one), option (ECharts) }, or { name, empty: why there is no chart }. The page draws
     the option; the figure mode (figures.js) draws the same option alone with title, axis
     names and caption. */
  function draw(id, spec) {
    if (spec.empty) empty(id, spec.empty);
    else chart(id).setOption(spec.option);
  }

  /* PC sampling: a stacked bar of stall reasons per range group (100 % each), and the hot
     spots of the kernels with the most samples. */
  function stallSpec() {
    var pc = data.pc;
    if (!pc) return { name: 'stall_mix', empty: 'The run has no PC sampling (gmprof run --pc-sampling).' };
    var groups = pc.groups.slice().reverse();
    if (!groups.length) return { name: 'stall_mix', empty: 'No range has PC samples.' };
    var used = pc.reasons.map(function (_, i) { return groups.some(function (g) { return known(g.shares[i]) && g.shares[i] > 0; }); });
    var series = [];
    pc.reasons.forEach(function (name, i) {
      if (!used[i]) return;
      series.push({ name: name, type: 'bar', stack: 'share', color: palette20[series.length % palette20.length],
        data: groups.map(function (g) { return known(g.shares[i]) ? g.shares[i] : null; }) });
    });
    return {
      name: 'stall_mix',
      title: 'Stall reasons per range group (' + groups.length + ' groups, PC sampling)',
      axes: { x: 'share of PC samples (%)', y: 'range group' },
      legend: true,
      option: {
        animation: false,
        legend: { type: 'scroll', top: 0 },
        tooltip: { trigger: 'item', formatter: function (p) {
          var g = groups[p.dataIndex];
          return shorten(g.label, 80) + '<br>' + p.seriesName + ': ' + fmtPct(p.value) + ' of ' + g.samples + ' samples';
        } },
        grid: { left: 220, right: 30, top: 40, bottom: 30 },
        xAxis: { type: 'value', max: 100, name: '% of samples' },
        yAxis: { type: 'category', data: groups.map(function (g) {
          return shorten(g.label, 32) + (g.few ? ' (' + g.samples + ' samples: too few)' : '');
        }) },
        series: series
      }
    };
  }
  function pcCharts() {
    var pc = data.pc;
    if (!pc) return;
    document.getElementById('pc-section').hidden = false;
    document.getElementById('pc-note').textContent = pc.note;
    draw('pc-groups', stallSpec());
    var cols = [
      { title: 'kernel', text: true, key: function (k) { return k.name; }, show: function (k) { return kernelLabel(k.name, 80); }, full: function (k) { return k.name; } },
      { title: 'samples', key: function (k) { return k.samples; }, show: function (k) { return String(k.samples); } },
      { title: 'top stall reasons', text: true, key: function (k) { return k.reasons; }, show: function (k) { return k.reasons; } },
      { title: 'hottest instructions', text: true, key: function (k) { return k.hot.join('; '); }, show: function (k) { return k.hot.join('; '); } }
    ];
    table('pc-kernels', cols, pc.kernels);
  }

  /* Steady-state GPU time per range group, top 25, with shares. */
  function rangeTimeSpec() {
    var rows = data.groups.filter(function (g) { return known(g.total_ns); }).slice(0, 25);
    if (!rows.length) return { name: 'range_time', empty: 'No range has a measured GPU time.' };
    var devices = [];
    rows.forEach(function (g) {
      (g.by_device || []).forEach(function (d) { if (devices.indexOf(d[0]) < 0) devices.push(d[0]); });
    });
    devices.sort(function (a, b) { return a - b; });
    var share = { show: true, position: 'right', formatter: function (p) { return fmtPct(rows[p.dataIndex].share_pct); } };
    var series = devices.length > 1 ? deviceSeries(rows, devices, share) : [{
      type: 'bar', barMaxWidth: 18, name: 'GPU time',
      data: rows.map(function (g) { return g.total_ns / 1e6; }),
      itemStyle: { color: '#2f6fdf' },
      label: share
    }];
    return {
      name: 'range_time',
      title: 'GPU time per range group (steady state, top ' + rows.length + ')',
      axes: { x: 'GPU time (ms)', y: 'range group (share of the top-level GPU time)' },
      legend: devices.length > 1,
      option: {
        animation: false,
        tooltip: {
          trigger: 'axis', axisPointer: { type: 'shadow' },
          formatter: function (ps) {
            var g = rows[ps[0].dataIndex];
            var text = g.label.replace(/[<>&]/g, '') + '<br>' + g.count + ' instances, total ' + fmtDur(g.total_ns) +
              ', mean ' + fmtDur(g.mean_ns) + ', p50 ' + fmtDur(g.p50_ns) + ', p99 ' + fmtDur(g.p99_ns) + ', share ' + fmtPct(g.share_pct);
            if (g.warmup_count) text += '<br>warm-up: ' + g.warmup_count + '\u00d7 ' + fmtDur(g.warmup_mean_ns);
            (g.by_device || []).forEach(function (d) { text += '<br>GPU ' + d[0] + ': ' + fmtDur(d[1]); });
            return text;
          }
        },
        grid: { left: 300, right: 90, top: devices.length > 1 ? 30 : 10, bottom: 30 },
        legend: devices.length > 1 ? { top: 0 } : undefined,
        xAxis: { type: 'value', name: 'ms', axisLabel: { formatter: function (v) { return (v).toFixed(1); } } },
        yAxis: { type: 'category', inverse: true, data: rows.map(function (g) { return shorten(g.label, 46); }), axisLabel: { fontSize: 11 } },
        series: series
      }
    };
  }

  /* Several GPUs in one process: one stacked bar segment per device (GPU time on it). */
  function deviceSeries(rows, devices, share) {
    var colors = ['#2f6fdf', '#e8833a', '#3aa76d', '#b04fc4', '#c9a227', '#d9534f', '#5bc0de', '#777777'];
    return devices.map(function (dev, i) {
      return {
        type: 'bar', stack: 'gpu', name: 'GPU ' + dev, barMaxWidth: 18,
        itemStyle: { color: colors[i % colors.length] },
        data: rows.map(function (g) {
          var d = (g.by_device || []).filter(function (x) { return x[0] === dev; })[0];
          return d ? d[1] / 1e6 : 0;
        }),
        label: i === devices.length - 1 ? share : undefined
      };
    });
  }

  /* DRAM bandwidth of range groups and kernels against the device's peak: figure `name`, of
     `rows` (labelled by `label`), `what` each row is. */
  function bandwidthSpec(name, rows, label, what) {
    if (!rows.length) return { name: name, empty: 'No ' + what + ' has a DRAM bandwidth: DRAM byte counters were not collected (trace mode collects none).' };
    var peak = meta.dram_peak_gbps;
    var max = Math.max.apply(null, rows.map(function (r) { return r.dram_gbps; }).concat(known(peak) ? [peak * 1.05] : []));
    return {
      name: name,
      title: 'DRAM bandwidth per ' + what + (known(peak) ? ' against the device\u2019s peak (top ' + rows.length + ')'
        : ' (top ' + rows.length + '; the device\u2019s peak is not known)'),
      axes: { x: 'DRAM bandwidth, read + write (GB/s)', y: what },
      option: {
        animation: false,
        title: { text: what + 's', left: 8, top: 4, textStyle: { fontSize: 13 } },
        tooltip: {
          trigger: 'axis', axisPointer: { type: 'shadow' },
          formatter: function (ps) {
            var r = rows[ps[0].dataIndex];
            var text = label(r).replace(/[<>&]/g, '') + '<br>' + fmtNum(r.dram_gbps, 1) + ' GB/s';
            if (known(peak)) text += ' (' + fmtPct(100 * r.dram_gbps / peak) + ' of peak)';
            return text;
          }
        },
        grid: { left: 230, right: 40, top: 34, bottom: 30 },
        xAxis: { type: 'value', name: 'GB/s', max: Math.ceil(max) },
        yAxis: { type: 'category', inverse: true, data: rows.map(function (r) { return label(r).length > 34 ? label(r).slice(0, 33) + '\u2026' : label(r); }), axisLabel: { fontSize: 11 } },
        series: [{
          type: 'bar', name: 'DRAM bandwidth', barMaxWidth: 16, data: rows.map(function (r) { return r.dram_gbps; }), itemStyle: { color: '#19a979' },
          markLine: known(peak) ? {
            symbol: 'none', lineStyle: { color: '#b3261e', type: 'dashed' },
            label: { formatter: 'peak ' + peak.toFixed(0) + ' GB/s', position: 'insideEndTop' },
            data: [{ xAxis: peak }]
          } : undefined
        }]
      }
    };
  }
  function rangeBandwidthSpec() {
    var rows = data.groups.filter(function (g) { return known(g.dram_gbps); }).slice(0, 20);
    return bandwidthSpec('dram_bandwidth', rows, function (g) { return g.label; }, 'range group');
  }
  function kernelBandwidthSpec() {
    var rows = data.kernels.filter(function (k) { return known(k.dram_gbps); }).slice(0, 20);
    return bandwidthSpec('dram_bandwidth_kernels', rows, function (k) { return kernelLabel(k.name, 60); }, 'kernel');
  }
  function bandwidth() {
    var peak = meta.dram_peak_gbps;
    document.getElementById('bandwidth-note').textContent = 'DRAM bytes read and written per GPU second, for the 20 range groups and the 20 kernels with the most time. ' +
      (known(peak) ? 'The dashed line is the device\u2019s theoretical peak, ' + peak.toFixed(0) + ' GB/s (memory clock \u00d7 bus width \u00d7 2).' : 'The device\u2019s peak is not known for this report.');
    draw('range-bandwidth', rangeBandwidthSpec());
    draw('kernel-bandwidth', kernelBandwidthSpec());
  }

  /* Roofline: each kernel name at (work per DRAM byte, work per second), under the roofs. */
  function rooflineSpec() {
    var r = data.roofline;
    if (!r) {
      return { name: 'roofline', empty: 'No FLOP or instruction counters were collected, so there is no roofline. Collect ' +
        'smsp__inst_executed.sum with dram__bytes_read.sum and dram__bytes_write.sum for an instruction roofline.' };
    }
    var flop = r.kind === 'flop';
    var unit = flop ? 'GFLOP/s' : 'G warp inst/s';
    var xunit = flop ? 'FLOP/byte' : 'warp inst/byte';
    var points = data.kernels.filter(function (k) { return known(k.intensity) && known(k.rate_g) && k.intensity > 0 && k.rate_g > 0; });
    if (!points.length) return { name: 'roofline', empty: 'The counters were collected, but no kernel has both work and DRAM bytes.' };
    var xs = points.map(function (p) { return p.intensity; });
    var ys = points.map(function (p) { return p.rate_g; });
    var xmin = Math.min.apply(null, xs) / 4, xmax = Math.max.apply(null, xs) * 4;
    var series = [];
    var maxTime = Math.max.apply(null, points.map(function (p) { return p.total_ns || 0; })) || 1;
    series.push({
      type: 'scatter', name: 'kernels',
      data: points.map(function (p) { return { value: [p.intensity, p.rate_g], name: p.name, itemStyle: { color: colorOf(p.name) } }; }),
      symbolSize: function (v, p) { return 6 + 18 * Math.sqrt((points[p.dataIndex].total_ns || 0) / maxTime); }
    });
    var ceiling = known(r.compute_peak_g) ? r.compute_peak_g : null;
    var roofs = [];
    if (known(r.dram_peak_gbps)) roofs.push('DRAM peak ' + r.dram_peak_gbps.toFixed(0) + ' GB/s');
    if (ceiling !== null) roofs.push((flop ? 'FP32 peak ' : 'issue peak ') + fmtG(ceiling) + ' ' + unit);
    var roof = { type: 'line', name: 'roof: ' + roofs.join(', '), showSymbol: false, lineStyle: { color: '#b3261e', type: 'dashed' }, itemStyle: { color: '#b3261e' } };
    if (known(r.dram_peak_gbps)) {
      var line = [];
      for (var i = 0; i <= 40; i++) {
        var x = xmin * Math.pow(xmax / xmin, i / 40);
        var y = r.dram_peak_gbps * x;
        if (ceiling !== null) y = Math.min(y, ceiling);
        line.push([x, y]);
      }
      roof.data = line;
      series.push(roof);
    } else if (ceiling !== null) {
      roof.data = [[xmin, ceiling], [xmax, ceiling]];
      series.push(roof);
    }
    var ymax = Math.max.apply(null, ys.concat(ceiling !== null ? [ceiling] : []).concat(known(r.dram_peak_gbps) && ceiling === null ? [r.dram_peak_gbps * xmax] : []));
    return {
      name: 'roofline',
      title: 'Roofline of ' + points.length + ' kernel names: ' + (flop ? 'FLOPs (' + r.precisions.join(', ') + ')' : 'warp instructions') + ' against DRAM bytes',
      axes: { x: 'arithmetic intensity (' + xunit + ')', y: 'performance (' + unit + ')' },
      legend: true,
      option: {
        animation: false,
        tooltip: {
          formatter: function (p) {
            if (p.seriesName !== 'kernels') return p.seriesName;
            var k = points[p.dataIndex];
            return kernelLabel(k.name, 90).replace(/[<>&]/g, '') + '<br>' + fmtG(k.intensity) + ' ' + xunit + ', ' + fmtG(k.rate_g) + ' ' + unit + ', ' + k.calls + ' calls, ' + fmtDur(k.total_ns);
          }
        },
        grid: { left: 80, right: 30, top: 20, bottom: 50 },
        xAxis: { type: 'log', name: xunit, nameLocation: 'middle', nameGap: 28, min: xmin, max: xmax, axisLabel: { formatter: fmtG, showMinLabel: false, showMaxLabel: false } },
        yAxis: { type: 'log', name: unit, min: Math.min.apply(null, ys) / 4, max: ymax * 2, axisLabel: { formatter: fmtG, showMinLabel: false, showMaxLabel: false } },
        series: series
      }
    };
  }
  function roofline() {
    var r = data.roofline;
    var noteNode = document.getElementById('roofline-note');
    if (r) {
      noteNode.textContent = (r.kind === 'flop' ? 'FLOPs (' + r.precisions.join(', ') + ')' : 'Warp instructions') + ' from ' + r.counters.join(', ') +
        '; bytes from the DRAM counters. Each point is one kernel name over all its calls; its size grows with its time. ' +
        (known(r.dram_peak_gbps) ? 'Sloped roof: DRAM peak. ' : '') +
        (known(r.compute_peak_g) ? (r.kind === 'flop' ? 'Flat roof: FP32 peak (CUDA cores, FMA).' : 'Flat roof: warp-instruction issue peak (4 schedulers per SM, one instruction per clock).')
          : 'No compute roof: its peak is known for FP32-only FLOP counters and for instruction counters.');
    } else {
      noteNode.textContent = '';
    }
    draw('roofline', rooflineSpec());
  }

  function tables() {
    var peak = meta.dram_peak_gbps;
    var flopUnit = data.roofline && data.roofline.kind === 'instruction' ? 'G inst/s' : 'GFLOP/s';
    var kcols = [
      { title: 'kernel', text: true, key: function (k) { return k.name; }, show: function (k) { return kernelLabel(k.name, 110); }, full: function (k) { return k.name; } },
      { title: 'calls', key: function (k) { return k.calls; }, show: function (k) { return String(k.calls); } },
      { title: 'total', key: function (k) { return k.total_ns; }, show: function (k) { return fmtDur(k.total_ns); } },
      { title: 'mean', key: function (k) { return k.mean_ns; }, show: function (k) { return fmtDur(k.mean_ns); } },
      { title: 'share', bar: true, key: function (k) { return k.share_pct; }, show: function (k) { return fmtPct(k.share_pct); } },
      { title: 'DRAM GB/s', key: function (k) { return k.dram_gbps; }, show: function (k) { return fmtNum(k.dram_gbps, 1); } },
      { title: '% of peak', key: function (k) { return known(peak) && known(k.dram_gbps) ? 100 * k.dram_gbps / peak : null; },
        show: function (k) { return known(peak) && known(k.dram_gbps) ? fmtPct(100 * k.dram_gbps / peak) : BLANK; } },
      { title: flopUnit, key: function (k) { return k.rate_g; }, show: function (k) { return fmtG(k.rate_g); } },
      { title: 'flagged', key: function (k) { return k.flagged; }, show: function (k) { return String(k.flagged); } }
    ];
    table('kernels', kcols, data.kernels);
    if (data.kernels_left_out > 0) document.getElementById('kernels-note').textContent += ' ' + data.kernels_left_out + ' more kernel names are in kernels.csv.';
    var gcols = [
      { title: 'range group', text: true, key: function (g) { return g.label; }, show: function (g) { return g.label; } },
      { title: 'folded', key: function (g) { return g.distinct; }, show: function (g) { return String(g.distinct); } },
      { title: 'count', key: function (g) { return g.count; }, show: function (g) { return String(g.count); } },
      { title: 'not measured', key: function (g) { return g.missing; }, show: function (g) { return String(g.missing); } },
      { title: 'total', key: function (g) { return g.total_ns; }, show: function (g) { return fmtDur(g.total_ns); } },
      { title: 'mean', key: function (g) { return g.mean_ns; }, show: function (g) { return fmtDur(g.mean_ns); } },
      { title: 'p50', key: function (g) { return g.p50_ns; }, show: function (g) { return fmtDur(g.p50_ns); } },
      { title: 'p99', key: function (g) { return g.p99_ns; }, show: function (g) { return fmtDur(g.p99_ns); } },
      { title: 'share', bar: true, key: function (g) { return g.share_pct; }, show: function (g) { return fmtPct(g.share_pct); } },
      { title: 'warm-up', key: function (g) { return g.warmup_count ? g.warmup_mean_ns : null; },
        show: function (g) { return g.warmup_count ? g.warmup_count + '\u00d7 ' + fmtDur(g.warmup_mean_ns) : BLANK; } },
      { title: 'kernels', key: function (g) { return g.kernels; }, show: function (g) { return String(g.kernels); } },
      { title: 'DRAM GB/s', key: function (g) { return g.dram_gbps; }, show: function (g) { return fmtNum(g.dram_gbps, 1); } }
    ];
    table('groups', gcols, data.groups);
    if (data.groups_left_out > 0) document.getElementById('groups-note').textContent += ' ' + data.groups_left_out + ' more groups are left out.';
  }

  /* A streamed run's step time (each point a bucket of steps: its mean, min and max), the
     slowest steps and slow windows marked. */
  function stepsSpec() {
    var st = data.streamed;
    if (!st) return { name: 'steps', empty: 'Not a streamed run: the step chart is drawn for runs past GMPROF_ROW_LIMIT.' };
    if (!st.series.length) return { name: 'steps', empty: 'The run has no step rows (no range repeats at the top level).' };
    var ms = function (v) { return known(v) ? v / 1e6 : null; };
    var mid = function (p) { return (p.first_step + p.last_step) / 2; };
    var slowAreas = st.windows.filter(function (w) { return w.slow; }).map(function (w) {
      return [{ xAxis: w.first_step, name: 'slow window ' + w.window }, { xAxis: w.last_step }];
    });
    return {
      name: 'steps',
      title: 'Time per step' + (st.step_group ? ' of ' + shorten(st.step_group, 40) : '') + ' (' + st.steps_shown + ' steps' +
        (st.bucket > 1 ? ', ' + st.bucket + ' steps per point' : '') + ')',
      axes: { x: 'step', y: 'time per step (ms)' },
      legend: true,
      option: {
        animation: false,
        color: ['#2f6fdf', '#2f6fdf', '#2f6fdf', '#19a979', '#b3261e'],
        legend: { top: 0, data: ['wall time (mean)', 'wall time (max)', 'wall time (min)', 'GPU time (mean)', 'slowest steps'] },
        tooltip: { trigger: 'axis', valueFormatter: function (v) { return known(v) ? v.toFixed(3) + ' ms' : BLANK; } },
        grid: { left: 70, right: 30, top: 36, bottom: 60 },
        dataZoom: [{ type: 'slider', bottom: 12 }, { type: 'inside' }],
        xAxis: { type: 'value', name: 'step', scale: true },
        yAxis: { type: 'value', name: 'ms', scale: true },
        series: [
          { name: 'wall time (max)', type: 'line', symbol: 'none', lineStyle: { width: 1, opacity: 0.45 },
            data: st.series.map(function (p) { return [mid(p), ms(p.wall[2])]; }) },
          { name: 'wall time (min)', type: 'line', symbol: 'none', lineStyle: { width: 1, opacity: 0.45 },
            data: st.series.map(function (p) { return [mid(p), ms(p.wall[0])]; }) },
          { name: 'wall time (mean)', type: 'line', symbol: 'none', data: st.series.map(function (p) { return [mid(p), ms(p.wall[1])]; }),
            markArea: { itemStyle: { color: 'rgba(179, 38, 30, 0.10)' }, data: slowAreas } },
          { name: 'GPU time (mean)', type: 'line', symbol: 'none', data: st.series.map(function (p) { return [mid(p), ms(p.gpu[1])]; }) },
          { name: 'slowest steps', type: 'scatter', symbolSize: 8, data: st.slow_steps.map(function (s) { return [s.step, s.wall_time_ns / 1e6]; }) }
        ]
      }
    };
  }

  /* A streamed run: step time over the run (each point a bucket of steps: its mean, min and
     max), the slowest steps and slow windows marked, and the whole run's aggregates. */
  function streamedCharts() {
    var st = data.streamed;
    if (!st) return;
    document.getElementById('streamed-section').hidden = false;
    var note = st.why + ' ' + st.steps + ' steps' + (st.step_group ? ' of `' + st.step_group + '`' : '') + '.';
    if (st.bucket > 1) note += ' Each point is ' + st.bucket + ' consecutive steps: their mean, and their minimum and maximum (so no slow step is averaged away).';
    if (st.steps_left_out > 0) note += ' The first ' + st.steps_shown + ' steps are drawn (from ' + st.steps_source + '); the other ' + st.steps_left_out + ' are in steps/.';
    if (st.left_out.length) note += ' Unreadable step parts, left out: ' + st.left_out.join('; ') + '.';
    note += ' Marked: the ' + st.slow_steps.length + ' slowest steps, and the windows of steps whose mean is at least 10% above the median window\'s.';
    document.getElementById('streamed-note').textContent = note;
    draw('streamed-steps', stepsSpec());
    var cols = function (what) {
      return [
        { title: what, text: true, key: function (a) { return a.key; }, show: function (a) { return kernelLabel(a.key, 110); }, full: function (a) { return a.key; } },
        { title: 'count', key: function (a) { return a.count; }, show: function (a) { return String(a.count); } },
        { title: 'not measured', key: function (a) { return a.missing; }, show: function (a) { return String(a.missing); } },
        { title: 'total', key: function (a) { return a.total_ns; }, show: function (a) { return fmtDur(a.total_ns); } },
        { title: 'mean', key: function (a) { return a.mean_ns; }, show: function (a) { return fmtDur(a.mean_ns); } },
        { title: 'min', key: function (a) { return a.min_ns; }, show: function (a) { return fmtDur(a.min_ns); } },
        { title: 'p50', key: function (a) { return a.p50_ns; }, show: function (a) { return fmtDur(a.p50_ns); } },
        { title: 'p90', key: function (a) { return a.p90_ns; }, show: function (a) { return fmtDur(a.p90_ns); } },
        { title: 'p99', key: function (a) { return a.p99_ns; }, show: function (a) { return fmtDur(a.p99_ns); } },
        { title: 'max', key: function (a) { return a.max_ns; }, show: function (a) { return fmtDur(a.max_ns); } }
      ];
    };
    table('streamed-ranges', cols('range group'), st.ranges);
    table('streamed-kernels', cols('kernel'), st.kernels);
  }

  /* per_kernel in rotation: one step of the main template, per range group, and each kernel
     name's mean per launch. Blank where a position was never measured. */
  function rotationTables() {
    var r = data.rotation;
    if (!r) return;
    document.getElementById('rotation-section').hidden = false;
    document.getElementById('rotation-note').textContent = r.note;
    var mb = function (v) { return known(v) ? fmtNum(v / 1e6, 2) + ' MB' : BLANK; };
    table('rotation-groups', [
      { title: 'range group', text: true, key: function (g) { return g.path; }, show: function (g) { return shorten(g.path, 110); }, full: function (g) { return g.path; } },
      { title: 'positions', key: function (g) { return g.positions; }, show: function (g) { return String(g.positions); } },
      { title: 'measured', key: function (g) { return g.measured; }, show: function (g) { return String(g.measured); } },
      { title: 'GPU time', key: function (g) { return g.gpu_time_ns; }, show: function (g) { return fmtDur(g.gpu_time_ns); } },
      { title: 'DRAM read', key: function (g) { return g.read_bytes; }, show: function (g) { return mb(g.read_bytes); } },
      { title: 'DRAM written', key: function (g) { return g.write_bytes; }, show: function (g) { return mb(g.write_bytes); } },
      { title: 'DRAM GB/s', key: function (g) { return g.dram_gbps; }, show: function (g) { return fmtNum(g.dram_gbps, 1); } }
    ], r.groups);
    table('rotation-kernels', [
      { title: 'kernel', text: true, key: function (k) { return k.name; }, show: function (k) { return kernelLabel(k.name, 110); }, full: function (k) { return k.name; } },
      { title: 'launches', key: function (k) { return k.launches; }, show: function (k) { return String(k.launches); } },
      { title: 'measured', key: function (k) { return k.measured; }, show: function (k) { return String(k.measured); } },
      { title: 'mean time', key: function (k) { return k.mean_ns; }, show: function (k) { return fmtDur(k.mean_ns); } },
      { title: 'DRAM read', key: function (k) { return k.read_bytes; }, show: function (k) { return mb(k.read_bytes); } },
      { title: 'DRAM written', key: function (k) { return k.write_bytes; }, show: function (k) { return mb(k.write_bytes); } }
    ], r.kernels);
  }

  header();
  if (window.gmprofFigures.requested()) {
    // report.html#figures: the figures alone (figures.js), in the order of the page.
    window.gmprofFigures.run([['steps', stepsSpec], ['range_time', rangeTimeSpec], ['dram_bandwidth', rangeBandwidthSpec],
      ['dram_bandwidth_kernels', kernelBandwidthSpec], ['roofline', rooflineSpec], ['stall_mix', stallSpec]], meta);
  } else {
    rotationTables();
    streamedCharts();
    timeline();
    pmChart();
    pcCharts();
    draw('range-time', rangeTimeSpec());
    bandwidth();
    roofline();
    tables();
    window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
  }
  document.body.setAttribute('data-render', 'ok');
})();
