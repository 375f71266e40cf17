// Hands each server-built ECharts option (data-chart) to the library; no chart logic lives here.
document.querySelectorAll("[data-chart]").forEach(function (el) {
  var chart = echarts.init(el);
  chart.setOption(JSON.parse(el.getAttribute("data-chart")));
  window.addEventListener("resize", function () { chart.resize(); });
});
