import { scaleBand, scaleLinear, scalePoint } from 'd3-scale';
import { line } from 'd3-shape';

/**
 * Charts drawn on the server as SVG (`views/partials/chart.eta`): no script, nothing inline for
 * the CSP to block (colours come from app.css by series). d3-scale and d3-shape do the maths.
 * Every chart is an `<svg role="img">` whose accessible name says what it shows; its numbers are
 * also in a table beside it (`table`), for screen readers and for anyone who wants the figures.
 */
interface Chart {
  /** The accessible name: what the chart shows, in words. */
  label: string;
  width: number;
  height: number;
  bars: { x: number; y: number; width: number; height: number; series: number; title: string }[];
  lines: { d: string; series: number }[];
  /** Axis and bar labels. */
  texts: { x: number; y: number; text: string; anchor: 'start' | 'middle' | 'end' }[];
  gridlines: { y: number }[];
  legend: { series: number; label: string }[];
  /** The same numbers as a table: a caption, the column headings, the rows. */
  table: { caption: string; columns: string[]; rows: (string | number)[][] };
}

const WIDTH = 640;
const MARGIN = { top: 12, right: 12, bottom: 28, left: 48 };

/** Round ticks from 0 to at least `max` (at least 1, so an empty chart still has an axis). */
function valueScale(max: number, height: number) {
  return scaleLinear()
    .domain([0, Math.max(1, max)])
    .nice(4)
    .range([height - MARGIN.bottom, MARGIN.top]);
}

function yAxis(y: ReturnType<typeof valueScale>): Pick<Chart, 'texts' | 'gridlines'> {
  const ticks = y.ticks(4).filter(Number.isInteger);
  return {
    gridlines: ticks.map((tick) => ({ y: y(tick) })),
    texts: ticks.map((tick) => ({ x: MARGIN.left - 6, y: y(tick) + 4, text: tick.toLocaleString('en-US'), anchor: 'end' as const })),
  };
}

/**
 * One or more series over the same labelled points (days, hours), as lines. `every` labels one
 * point in so many on the axis, so a month of days stays readable at 375 px.
 */
export function lineChart(options: {
  label: string;
  caption: string;
  pointHeading: string;
  points: string[];
  series: { label: string; values: number[] }[];
  every?: number;
}): Chart {
  const { points, series } = options;
  const height = 220;
  const x = scalePoint<number>()
    .domain(points.map((_, i) => i))
    .range([MARGIN.left + 8, WIDTH - MARGIN.right - 8]);
  const y = valueScale(Math.max(0, ...series.flatMap((s) => s.values)), height);
  const axis = yAxis(y);
  const every = options.every ?? Math.max(1, Math.ceil(points.length / 6));
  const draw = line<number>()
    .x((_, i) => x(i) ?? 0)
    .y((value) => y(value));
  return {
    label: options.label,
    width: WIDTH,
    height,
    bars: [],
    lines: series.map((s, index) => ({ d: draw(s.values) ?? '', series: index })),
    texts: [
      ...axis.texts,
      ...points.flatMap((point, i) =>
        i % every === 0 ? [{ x: x(i) ?? 0, y: height - MARGIN.bottom + 18, text: point, anchor: 'middle' as const }] : [],
      ),
    ],
    gridlines: axis.gridlines,
    legend: series.map((s, index) => ({ series: index, label: s.label })),
    table: {
      caption: options.caption,
      columns: [options.pointHeading, ...series.map((s) => s.label)],
      rows: points.map((point, i) => [point, ...series.map((s) => s.values[i] ?? 0)]),
    },
  };
}
/** Steps from the most to the fewest (sent, delivered, opened, …) as horizontal bars, each with its number and share of the first. */
export function funnelChart(options: { label: string; caption: string; steps: { label: string; value: number }[] }): Chart {
  const { steps } = options;
  const left = 96;
  const height = steps.length * 34 + 8;
  const band = scaleBand<number>()
    .domain(steps.map((_, i) => i))
    .range([4, height - 4])
    .padding(0.2);
  const first = steps[0]?.value ?? 0;
  const x = scaleLinear()
    .domain([0, Math.max(1, ...steps.map((s) => s.value))])
    .range([0, WIDTH - left - 120]);
  const share = (value: number) => (first > 0 ? `${Math.round((value / first) * 1000) / 10} %` : '–');
  return {
    label: options.label,
    width: WIDTH,
    height,
    bars: steps.map((step, i) => ({
      x: left,
      y: band(i) ?? 0,
      width: Math.max(1, x(step.value)),
      height: band.bandwidth(),
      series: i,
      title: `${step.label}: ${step.value.toLocaleString('en-US')}`,
    })),
    lines: [],
    texts: steps.flatMap((step, i) => {
      const middle = (band(i) ?? 0) + band.bandwidth() / 2 + 4;
      return [
        { x: left - 8, y: middle, text: step.label, anchor: 'end' as const },
        {
          x: left + Math.max(1, x(step.value)) + 6,
          y: middle,
          text: `${step.value.toLocaleString('en-US')} (${share(step.value)})`,
          anchor: 'start' as const,
        },
      ];
    }),
    gridlines: [],
    legend: [],
    table: {
      caption: options.caption,
      columns: ['Step', 'Count', 'Share of the first'],
      rows: steps.map((step) => [step.label, step.value, share(step.value)]),
    },
  };
}
