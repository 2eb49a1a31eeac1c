/* gmprof diff page: draws the diff gmprof embedded in #gmprof-data with ECharts. */
(function () {
  'use strict';
  var ui = window.gmprofUi;
  var BLANK = ui.BLANK, el = ui.el, known = ui.known, fmtDur = ui.fmtDur, fmtPct = ui.fmtPct;
  var kernelLabel = ui.kernelLabel, shorten = ui.shorten, table = ui.table;
  var diff = JSON.parse(document.getElementById('gmprof-data').textContent);
  var charts = [];
  var TOP = 25;
  var COLORS = { slower: '#c8372d', faster: '#19a979', higher: '#e8743b', lower: '#2f6fdf' };
  function color(verdict) { return COLORS[verdict] || '#9aa3b2'; }
  var chart = ui.chartsInto(charts), empty = ui.empty;
  function signedPct(v) { return known(v) ? (v > 0 ? '+' : '') + v.toFixed(1) + '%' : BLANK; }
  function signedDur(v) { return known(v) ? (v > 0 ? '+' : '') + fmtDur(v) : BLANK; }
  function label(row, n) { return row.kind === 'kernel' ? kernelLabel(row.name, n) : shorten(row.name, n); }
  function timeRows(kind) {
    return diff.rows.filter(function (r) { return r.kind === kind && r.quantity === 'gpu_time_ns'; });
  }

  function header() {
    document.getElementById('title').textContent = 'gmprof diff: ' + diff.base.path + ' \u2192 ' + diff.new.path;
    var facts = document.getElementById('facts');
    [['base', diff.base], ['new', diff.new]].forEach(function (pair) {
      var s = pair[1];
      var span = el('span');
      span.appendChild(el('b', {}, pair[0] + ': '));
      span.appendChild(document.createTextNode(s.path + ' \u00b7 ' + (s.device_name || 'unknown GPU') + ' \u00b7 ' + s.mode +
        ' \u00b7 ' + s.processes.length + ' process(es) \u00b7 steady GPU time ' + fmtDur(s.total_gpu_time_ns)));
      facts.appendChild(span);
    });
    var warnings = document.getElementById('warnings');
    diff.warnings.forEach(function (w) { warnings.appendChild(el('p', { 'class': 'bad' }, 'Not comparable: ' + w)); });
    document.getElementById('method').textContent = 'Method: ' + diff.method + '.';
    var lines = [];
    ['range', 'kernel'].forEach(function (kind) {
      var by = {};
      timeRows(kind).forEach(function (r) { by[r.verdict] = (by[r.verdict] || 0) + 1; });
      lines.push(kind + 's: ' + (Object.keys(by).map(function (v) { return by[v] + ' ' + v; }).join(', ') || 'none'));
    });
    var others = diff.rows.filter(function (r) { return r.quantity !== 'gpu_time_ns' && ['higher', 'lower'].indexOf(r.verdict) >= 0; });
    lines.push('other quantities beyond noise: ' + others.length);
    document.getElementById('counts').textContent = lines.join('\n');
  }

  function rangeChange() {
    var rows = timeRows('range').filter(function (r) { return known(r.change_pct); }).slice(0, TOP);
    if (!rows.length) { empty('range-change', 'No range group was measured on both sides.'); return; }
    rows = rows.slice().reverse();
    chart('range-change').setOption({
      animation: false,
      tooltip: { trigger: 'item', formatter: function (p) {
        var r = rows[p.dataIndex];
        return (r.name.replace(/[<>&]/g, '') + '<br>' + fmtDur(r.base_median) + ' \u2192 ' + fmtDur(r.new_median) +
          ' (' + signedPct(r.change_pct) + ')<br>' + r.verdict + ', p(adj) ' + (known(r.p_adjusted) ? r.p_adjusted.toPrecision(2) : BLANK) +
          ', n ' + r.base_n + ' / ' + r.new_n);
      } },
      grid: { left: 260, right: 40, top: 10, bottom: 40 },
      xAxis: { type: 'value', name: 'change of median, %', nameLocation: 'middle', nameGap: 26 },
      yAxis: { type: 'category', data: rows.map(function (r) { return label(r, 40); }), axisLabel: { fontSize: 11 } },
      series: [{ type: 'bar', data: rows.map(function (r) {
        return { value: r.change_pct, itemStyle: { color: color(r.verdict) } };
      }) }]
    });
  }

  function impact(kind, id) {
    var rows = timeRows(kind).filter(function (r) { return known(r.impact_ns); }).slice(0, 15);
    if (!rows.length) { empty(id, 'No ' + kind + ' with a measured impact.'); return; }
    rows = rows.slice().reverse();
    chart(id).setOption({
      animation: false,
      title: { text: kind === 'range' ? 'range groups' : 'kernels', left: 'center', textStyle: { fontSize: 13 } },
      tooltip: { trigger: 'item', formatter: function (p) {
        var r = rows[p.dataIndex];
        return r.name.replace(/[<>&]/g, '').slice(0, 200) + '<br>' + signedDur(r.impact_ns) + ' (' + signedPct(r.impact_pct) + ' of the total), ' + r.verdict;
      } },
      grid: { left: 200, right: 30, top: 30, bottom: 40 },
      xAxis: { type: 'value', name: 'GPU time per process', nameLocation: 'middle', nameGap: 26, axisLabel: { formatter: fmtDur } },
      yAxis: { type: 'category', data: rows.map(function (r) { return label(r, 30); }), axisLabel: { fontSize: 11 } },
      series: [{ type: 'bar', data: rows.map(function (r) {
        return { value: r.impact_ns, itemStyle: { color: color(r.verdict) } };
      }) }]
    });
  }

  function rowsTable() {
    function num(key, fmt) {
      return { title: key.replace(/_/g, ' '), key: function (r) { return r[key]; }, show: function (r) { return fmt(r[key], r); } };
    }
    function value(v, r) { return !known(v) ? BLANK : r.quantity === 'gpu_time_ns' ? fmtDur(v) : (Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4)); }
    var cols = [
      { title: 'kind', text: true, key: function (r) { return r.kind; }, show: function (r) { return r.kind; } },
      { title: 'name', text: true, key: function (r) { return r.name; }, show: function (r) { return label(r, 80); }, full: function (r) { return r.name; } },
      { title: 'quantity', text: true, key: function (r) { return r.quantity; }, show: function (r) { return r.quantity; } },
      num('base_n', function (v) { return String(v); }),
      num('new_n', function (v) { return String(v); }),
      num('base_median', value),
      num('new_median', value),
      num('change_pct', signedPct),
      { title: 'p(adj)', key: function (r) { return r.p_adjusted; }, show: function (r) { return known(r.p_adjusted) ? r.p_adjusted.toPrecision(2) : BLANK; } },
      { title: 'verdict', text: true, key: function (r) { return r.verdict; }, show: function (r) { return r.verdict; } },
      num('impact_ns', signedDur),
      num('impact_pct', signedPct)
    ];
    table('rows', cols, diff.rows);
  }

  header();
  rangeChange();
  impact('range', 'range-impact');
  impact('kernel', 'kernel-impact');
  rowsTable();
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
  document.body.setAttribute('data-render', 'ok');
})();
