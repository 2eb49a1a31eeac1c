/* gmprof HTML report, figure mode: the page opened as report.html#figures (as `gmprof report
   OUT --figures DIR` opens it in headless Chromium) draws each chart that is a figure alone, at
   a publication size, from the same ECharts option the page draws (report.js makes it), with a
   title, axis names with units and a caption line of the run's facts. Each is exported as SVG
   (ECharts' SVG renderer) and as PNG (the canvas renderer at twice the pixel ratio), shown on
   the page with links to save it, and handed out in <script type="application/json"
   id="gmprof-figures">: JSON with no character past ASCII and no <, > or & (so the page's
   serialization is the JSON as written) of
     { figures: [{ name, title, width, height, pixel_ratio, svg, png (a data: URL) }],
       skipped: [{ name, why }], errors: [each script error and console.error of the page] }.
   A figure whose drawing throws is left out, its error counted (data-errors) and listed.
   As window.gmprofFigures; uses window.gmprofUi and echarts. */
(function () {
  'use strict';
  var WIDTH = 1000;
  var RATIO = 2;
  var ROW = 26;
  var ui = window.gmprofUi;

  function requested() { return window.location.hash === '#figures'; }

  function caption(meta) {
    return 'GPU: ' + meta.device + ' (chip ' + meta.chip + ') \u00b7 mode: ' + meta.mode + ' \u00b7 grouped by ' +
      meta.group_by + ' \u00b7 gmprof ' + meta.version;
  }

  function copy(o) { return Object.assign({}, o || {}); }

  /* Lines a centred legend of these names takes across the figure (12 px text, icon, gap). */
  function legendLines(names) {
    var lines = 1, used = 0, room = WIDTH - 60;
    names.forEach(function (n) {
      var w = 6.8 * String(n).length + 40;
      if (used > 0 && used + w > room) { lines++; used = 0; }
      used += w;
    });
    return lines;
  }

  function axis(a, name, which) {
    a = copy(a);
    a.name = name;
    a.nameTextStyle = { fontSize: 13, color: '#1d2330' };
    a.axisLabel = Object.assign({}, a.axisLabel, { fontSize: 12, color: '#333a46' });
    if (a.type === 'category') {
      // Above the first row, ending at the axis line (the row labels are on its left).
      a.nameLocation = a.inverse ? 'start' : 'end';
      a.nameGap = 10;
      a.nameTextStyle.align = 'right';
    } else {
      a.nameLocation = 'middle';
      a.nameGap = which === 'x' ? 30 : 52;
    }
    return a;
  }

  /* The figure's option: the page's option without its interaction (tooltip, zoom), with the
     title, the caption, a legend where the spec asks for one, and the axis names. */
  function figureOption(spec, meta) {
    var o = copy(spec.option);
    delete o.tooltip;
    delete o.dataZoom;
    o.animation = false;
    o.backgroundColor = '#ffffff';
    o.title = [
      { text: spec.title, left: 'center', top: 12, textStyle: { fontSize: 16, fontWeight: 'bold', color: '#1d2330' } },
      { text: caption(meta), left: 'center', bottom: 10, textStyle: { fontSize: 11, fontWeight: 'normal', color: '#5b6475' } }
    ];
    var top = 48;
    if (spec.legend) {
      var names = (o.legend && o.legend.data) || o.series.map(function (s) { return s.name; });
      o.legend = { type: 'plain', top: 44, left: 'center', data: names, textStyle: { fontSize: 12 } };
      top += 24 * legendLines(names);
    } else {
      delete o.legend;
    }
    o.grid = copy(o.grid);
    o.grid.top = top + 24;
    o.grid.bottom = 78;
    o.grid.right = Math.max(o.grid.right || 0, 40);
    o.xAxis = axis(o.xAxis, spec.axes.x, 'x');
    o.yAxis = axis(o.yAxis, spec.axes.y, 'y');
    return o;
  }

  /* The figure's height: a row per category of a bar chart, else a fixed plot. */
  function heightOf(option) {
    var cat = [option.xAxis, option.yAxis].filter(function (a) { return a.type === 'category'; })[0];
    var plot = cat ? Math.max(cat.data.length * ROW, 160) : 400;
    return Math.round(option.grid.top + plot + option.grid.bottom);
  }

  function draw(spec, meta) {
    var height = heightOf(figureOption(spec, meta));
    var svgChart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: height });
    svgChart.setOption(figureOption(spec, meta));
    var svg = svgChart.renderToSVGString();
    svgChart.dispose();
    var box = document.createElement('div');
    var canvasChart = echarts.init(box, null, { renderer: 'canvas', width: WIDTH, height: height, devicePixelRatio: RATIO });
    canvasChart.setOption(figureOption(spec, meta));
    var png = canvasChart.getDataURL({ type: 'png', pixelRatio: RATIO, backgroundColor: '#ffffff' });
    canvasChart.dispose();
    return { name: spec.name, title: spec.title, width: WIDTH, height: height, pixel_ratio: RATIO, svg: svg, png: png };
  }

  /* JSON that the page's serialization leaves as it is: ASCII, no <, > or &. */
  function plainJson(value) {
    return JSON.stringify(value).replace(/[\u007f-\uffff<>&]/g, function (c) {
      return '\\u' + ('0000' + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }

  function show(figures, skipped) {
    var el = ui.el;
    var main = document.querySelector('main');
    while (main.firstChild) main.removeChild(main.firstChild);
    var section = el('section');
    section.appendChild(el('h2', {}, 'Figures'));
    section.appendChild(el('p', { 'class': 'note' }, 'Each chart of the report alone, as `gmprof report OUT --figures DIR` ' +
      'writes it (with the table behind it as CSV). Open the page without #figures for the interactive report.'));
    figures.forEach(function (f) {
      var box = el('figure', { id: 'figure-' + f.name });
      box.appendChild(el('img', { src: f.png, width: String(f.width), alt: f.title, style: 'max-width: 100%; height: auto' }));
      var cap = el('figcaption', {}, f.name + ' \u00b7 ');
      cap.appendChild(el('a', { download: f.name + '.svg', href: 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(f.svg) }, 'SVG'));
      cap.appendChild(document.createTextNode(' \u00b7 '));
      cap.appendChild(el('a', { download: f.name + '.png', href: f.png }, 'PNG'));
      box.appendChild(cap);
      section.appendChild(box);
    });
    skipped.forEach(function (s) { section.appendChild(el('p', { 'class': 'note' }, s.name + ' skipped: ' + s.why)); });
    main.appendChild(section);
  }

  /* Draws each figure of `makers` ([name, function returning its spec]) and hands them out. */
  function run(makers, meta) {
    var figures = [], skipped = [];
    makers.forEach(function (m) {
      try {
        var spec = m[1]();
        if (spec.empty) skipped.push({ name: m[0], why: spec.empty });
        else figures.push(draw(spec, meta));
      } catch (e) {
        console.error('figure ' + m[0] + ': ' + (e && e.message ? e.message : String(e)));
      }
    });
    show(figures, skipped);
    var out = ui.el('script', { type: 'application/json', id: 'gmprof-figures' });
    out.textContent = plainJson({ figures: figures, skipped: skipped, errors: (window.gmprofErrors || []).slice() });
    document.body.appendChild(out);
    document.body.setAttribute('data-figures', String(figures.length));
  }

  window.gmprofFigures = { requested: requested, run: run };
})();
