/* gmprof HTML pages (the report and the diff): helpers both pages' scripts share, as
   window.gmprofUi. Values that were not measured are null: shown as an em dash. */
(function () {
  'use strict';
  var BLANK = '\u2014';
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function known(v) { return v !== null && v !== undefined && !(typeof v === 'number' && !isFinite(v)); }
  function fmtDur(ns) {
    if (!known(ns)) return BLANK;
    var a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
    if (a < 1e9) return (ns / 1e6).toFixed(3) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  function fmtNum(v, digits) { return known(v) ? v.toFixed(digits) : BLANK; }
  function fmtPct(v) { return known(v) ? v.toFixed(1) + '%' : BLANK; }
  function fmtG(v) {
    if (!known(v)) return BLANK;
    if (v >= 100) return v.toFixed(0);
    if (v >= 1) return v.toFixed(2);
    return v.toPrecision(3);
  }
  /* A kernel's demangled name without "void " and its argument list, cut to n characters. */
  function kernelLabel(name, n) {
    var text = name.replace(/^void /, '').replace(/\(anonymous namespace\)/g, '{anonymous}');
    var depth = 0;
    for (var i = 0; i < text.length; i++) {
      var ch = text.charAt(i);
      if (ch === '<') depth++;
      else if (ch === '>') depth--;
      else if (ch === '(' && depth === 0 && i > 0) { text = text.slice(0, i); break; }
    }
    return text.length <= n ? text : text.slice(0, n - 1) + '\u2026';
  }
  function shorten(text, n) { return text.length <= n ? text : '\u2026' + text.slice(text.length - n + 1); }
  /* Sortable tables: nulls always last. */
  function table(id, columns, rows) {
    var node = document.getElementById(id);
    var thead = el('thead'), tr = el('tr'), tbody = el('tbody');
    var state = { column: -1, descending: true };
    columns.forEach(function (col, i) {
      var th = el('th', { 'class': col.text ? 'text' : '' }, col.title);
      th.addEventListener('click', function () {
        state.descending = state.column === i ? !state.descending : !col.text;
        state.column = i;
        Array.prototype.forEach.call(tr.children, function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', state.descending ? 'descending' : 'ascending');
        render();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    node.appendChild(thead);
    node.appendChild(tbody);
    function render() {
      var sorted = rows.slice();
      if (state.column >= 0) {
        var key = columns[state.column].key;
        sorted.sort(function (a, b) {
          var x = key(a), y = key(b);
          if (!known(x) && !known(y)) return 0;
          if (!known(x)) return 1;
          if (!known(y)) return -1;
          var c = typeof x === 'string' ? x.localeCompare(y) : x - y;
          return state.descending ? -c : c;
        });
      }
      var body = el('tbody');
      sorted.forEach(function (row) {
        var r = el('tr');
        columns.forEach(function (col) {
          var td = el('td', { 'class': col.text ? 'text' : '' });
          if (col.bar) {
            var v = col.key(row);
            if (known(v)) td.appendChild(el('span', { 'class': 'bar', style: 'width:' + Math.max(1, Math.min(100, v)).toFixed(0) + 'px' }));
          }
          td.appendChild(document.createTextNode(col.show(row)));
          if (col.text) td.title = col.full ? col.full(row) : col.show(row);
          r.appendChild(td);
        });
        body.appendChild(r);
      });
      node.replaceChild(body, tbody);
      tbody = body;
    }
    render();
  }
  /* A function that draws an ECharts chart in element `id` and keeps it in `charts` (for resizing). */
  function chartsInto(charts) {
    return function (id) {
      var c = echarts.init(document.getElementById(id), null, { renderer: 'canvas' });
      charts.push(c);
      return c;
    };
  }
  /* Element `id` becomes a note saying why it holds no chart. */
  function empty(id, message) {
    var node = document.getElementById(id);
    node.className = 'empty';
    node.textContent = message;
  }
  window.gmprofUi = {
    BLANK: BLANK, el: el, known: known, fmtDur: fmtDur, fmtNum: fmtNum, fmtPct: fmtPct, fmtG: fmtG,
    kernelLabel: kernelLabel, shorten: shorten, table: table, chartsInto: chartsInto, empty: empty
  };
})();
