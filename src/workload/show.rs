//! What a workload shows of its result, as data: the reports decide how to draw it. A
//! workload says which numbers it gives Prometheus and which lines and charts belong in
//! the text and HTML reports; `report/` renders them without knowing which workload
//! they came from.

/// A Prometheus metric family a workload gives, one sample per device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricFamily {
    /// The name, `kiln_` first and the base unit last (`kiln_vram_errors`).
    pub name: &'static str,
    /// The `# HELP` line.
    pub help: &'static str,
}

/// One value of one of a workload's [`MetricFamily`]s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// The family's name.
    pub family: &'static str,
    /// The value, in the family's base unit.
    pub value: f64,
}

/// One bar of a bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What it measures.
    pub label: String,
    /// Its length.
    pub value: f64,
    /// A mark to hold it against (a best round, a link's theory), if any.
    pub mark: Option<f64>,
    /// Its own unit where it is not its chart's (an integer rate beside floating-point
    /// ones: `GOP/s` beside `GFLOP/s`).
    pub unit: Option<&'static str>,
}

impl Bar {
    /// A bar with no mark.
    pub fn new(label: impl Into<String>, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
            mark: None,
            unit: None,
        }
    }

    /// A bar with a mark.
    pub fn marked(label: impl Into<String>, value: f64, mark: Option<f64>) -> Bar {
        Bar {
            label: label.into(),
            value,
            mark,
            unit: None,
        }
    }

    /// The bar in a unit of its own.
    pub fn in_unit(mut self, unit: &'static str) -> Bar {
        self.unit = Some(unit);
        self
    }
}

/// One point of an [`Section::OffsetMap`].
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetPoint {
    /// Where, from the start of the span.
    pub offset_bytes: u64,
    /// Its row (a pass and step of the test, numbered from 0 in order).
    pub row: usize,
    /// What it was, for the point's tooltip.
    pub title: String,
}

/// A table of what went wrong, one row per place (a failing word, a wrong element, a
/// corrupted transfer), for the HTML report and its PDF: the numbers a support desk
/// reproduces a fault from, never hidden in a tooltip.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its caption.
    pub title: String,
    /// What one record is, for counts (`wrong read`): a place can give several.
    pub noun: &'static str,
    /// What one place is (`word`, `element`): the reports show one row per place.
    pub place: &'static str,
    /// The column headings.
    pub columns: Vec<&'static str>,
    /// The rows, as recorded (the records are capped; `total` says how many there were).
    pub rows: Vec<TableRow>,
    /// How many there were in all, recorded or not.
    pub total: u64,
}

/// One row of a [`Table`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    /// The place it is about (an offset, an element), the same in every run that finds
    /// it: the report counts in how many confirmation runs each place came back.
    pub key: String,
    /// The cells, one per column.
    pub cells: Vec<String>,
    /// How many records of the run it stands for (a word read wrong four times is one
    /// row of count 4).
    pub count: u64,
}

/// A part of a workload's section in the reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// Lines of the text report, each shown after the workload's name. A workload with
    /// none is shown by its headline.
    Lines(Vec<String>),
    /// A bar chart of the HTML report.
    Bars {
        /// Its caption.
        title: String,
        /// The bars' unit.
        unit: String,
        /// The bars, in order.
        bars: Vec<Bar>,
    },
    /// Where in a span of memory something was found (x), by when (y), for the HTML
    /// report.
    OffsetMap {
        /// Its caption.
        title: String,
        /// The span's length.
        span_bytes: u64,
        /// How many rows the points fall in.
        rows: usize,
        /// The points; none is said as `none`.
        points: Vec<OffsetPoint>,
        /// What to say when there is no point.
        none: String,
    },
    /// What went wrong, place by place, for the HTML report.
    Table(Table),
}
