"""The programme's picture around the presenter: the set behind (``sets``), the broadcast graphics in front (``layers``:
name strap, segment title, ticker, clock, channel logo, an over-the-shoulder box), the text they draw (``text``) and
the compositor that puts presenter, matte, set and graphics together on the generator's device (``compositor``).
What a programme looks like is data (``look``): the rundown keeps it per programme and per segment."""
