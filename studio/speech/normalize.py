"""Numbers, dates, times, money and abbreviations written the way a newsreader says them.

Both voices read text through eSpeak NG's rules, which already say plain numbers, decimals, ordinals ("1st"),
percentages ("10%"), signs and thousands separators well. Checked by phonemizing with the Piper voice, they get these
wrong, and only these are rewritten here (into words or digit groups eSpeak then reads right):
- money: "$5.2 billion" was "dollar five point two billion" -> "5.2 billion dollars"; "£3.50" -> "3 pounds 50";
  "$0.99" -> "99 cents"; "€20" was "euros twenty"; "4.5bn" was "four point five B N" -> "4.5 billion";
- times: "12:00" was "twelve zero zero" -> "12 o'clock"; "3:05" was "three zero five" -> "3 oh 5"; "a.m." / "p.m."
  -> "AM" / "PM" (the dots ended the sentence);
- dates: "2026-12-04" was "two thousand twenty six dash twelve dash zero four" -> "December 4th, 20 26"; "Dec. 4"
  (the dot ended the sentence) -> "December 4th"; years after a month or words like "in", "since", "by" are read in
  pairs ("in 1998" -> "in 19 98"; 2000-2009 stay "two thousand N"), and 2010-2099 standing alone too ("2026" ->
  "20 26"); "the 1990s" was
  "nineteen hundred ninety z" -> "the 19 nineties"; "2024-25" -> "20 24 to 25";
- abbreviations whose dot ended the sentence (a pause and a falling tone mid-sentence): "Mr.", "Mrs.", "Dr.", "St.",
  "No. 5", "Jr." ... -> the words;
- fractions "1/2", "3/4" (were "one slash two") -> "one half", "three quarters"; "24/7" -> "24 7";
- units after a number: "km", "km/h", "mph", "kg", "cm", "mm", "°C", "°F", "ft", "lb" were read as letters.
Everything else is left to the voice. The rewrite keeps, for every character, where it came from (``MappedText``).
"""

from __future__ import annotations

import re

from studio.speech.mapped import MappedText

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_MONTH_ABBR = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_MONTH_NAMES = "|".join(MONTHS)
_MONTH_ABBRS = "|".join(sorted(_MONTH_ABBR, key=len, reverse=True))

_TITLES = {"Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Dr": "Doctor", "Prof": "Professor", "Gen": "General",
           "Gov": "Governor", "Sen": "Senator", "Rep": "Representative", "Sgt": "Sergeant", "Capt": "Captain",
           "Lt": "Lieutenant", "Col": "Colonel", "Rev": "Reverend", "St": "Saint", "Supt": "Superintendent",
           "Insp": "Inspector", "Det": "Detective", "Cllr": "Councillor"}
_SUFFIXES = {"Jr": "Junior", "Sr": "Senior"}

_CURRENCIES = {
    # symbol: (one, many, minor one, minor many); minor None: no minor unit spoken
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
    "¥": ("yen", "yen", None, None),
}
_COUNTRY_DOLLARS = {"US": "US", "A": "Australian", "C": "Canadian", "NZ": "New Zealand", "HK": "Hong Kong"}
_SCALES = {"thousand": "thousand", "k": "thousand", "million": "million", "m": "million", "mn": "million",
           "billion": "billion", "bn": "billion", "trillion": "trillion", "tn": "trillion"}
_FRACTIONS = {"1/2": "one half", "1/3": "one third", "2/3": "two thirds", "1/4": "one quarter",
              "3/4": "three quarters"}
_DECADES = {"0": "hundreds", "1": "tens", "2": "twenties", "3": "thirties", "4": "forties", "5": "fifties",
            "6": "sixties", "7": "seventies", "8": "eighties", "9": "nineties"}
_UNITS = {  # unit: (one, many)
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"), "km": ("kilometer", "kilometers"), "kg": ("kilogram", "kilograms"),
    "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"), "ft": ("foot", "feet"),
    "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
}
_YEAR_CUES = ("in|since|by|until|till|from|before|after|during|around|circa|year|of|early|late|mid|through|"
              "spring|summer|autumn|fall|winter|" + _MONTH_NAMES)


def ordinal(n: int) -> str:
    """``4`` -> ``4th`` (eSpeak reads the digits with the suffix as an ordinal word)."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return str(n) + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def year_words(year: int) -> str:
    """How a newsreader says a year, as digit groups eSpeak reads: 1998 -> "19 98", 1905 -> "19 oh 5",
    1900 -> "19 hundred", 2000..2009 -> "2000" / "2009" ("two thousand nine"), 2026 -> "20 26"."""
    if 2000 <= year <= 2009 or year <= 1000 or year > 2099:
        return str(year)
    hi, lo = divmod(year, 100)
    if lo == 0:
        return f"{hi} hundred"
    if lo < 10:
        return f"{hi} oh {lo}"
    return f"{hi} {lo}"


def _plural(amount: str, one: str, many: str) -> str:
    return one if amount in ("1", "1.0") else many


def _sentence_dot(m: re.Match[str], text: str) -> str:
    """A '.' to keep where the abbreviation's dot also ended the sentence (end of text, or a capital follows)."""
    rest = text[m.end():]
    return "." if not rest.strip() or re.match(r"\s+[A-Z\"“]", rest) else ""


def _money(m: re.Match[str]) -> str | None:
    country, symbol, whole, frac, scale = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    one, many, minor_one, minor_many = _CURRENCIES[symbol]
    if country:
        if symbol != "$":
            return None
        one, many = f"{_COUNTRY_DOLLARS[country]} {one}", f"{_COUNTRY_DOLLARS[country]} {many}"
    if scale:
        return f"{whole}{frac or ''} {_SCALES[scale.lower()]} {many}"
    if frac and len(frac) == 3 and minor_one is not None:  # .NN: the minor unit
        cents = int(frac[1:])
        if whole.replace(",", "") in ("0", ""):
            return f"{cents} {minor_one if cents == 1 else minor_many}" if cents else f"0 {many}"
        main = f"{whole} {_plural(whole, one, many)}"
        return f"{main} {cents}" if cents else main
    amount = f"{whole}{frac or ''}"
    return f"{amount} {_plural(amount, one, many)}"


def _time(m: re.Match[str], text: str) -> str | None:
    hour, minute, ampm = int(m.group(1)), m.group(2), m.group(3)
    if hour > 24 or int(minute) > 59:
        return None
    suffix = ""
    if ampm:
        suffix = " " + ("AM" if ampm.strip()[0] in "aA" else "PM")
        if ampm.endswith("."):
            suffix += _sentence_dot(m, text)
    if minute == "00":
        if ampm:
            return f"{hour}{suffix}"
        return f"{hour} o'clock" if 1 <= hour <= 12 else f"{hour} hundred"
    if minute[0] == "0":
        return f"{hour} oh {int(minute)}{suffix}"
    return f"{hour} {minute}{suffix}"


def _unit(m: re.Match[str], text: str) -> str:
    one, many = _UNITS[m.group(1)]
    number = re.search(r"[\d.,]+$", text[:m.start()].rstrip())
    return " " + (one if number and number.group(0) == "1" else many)


def _iso_date(m: re.Match[str]) -> str | None:
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{MONTHS[month - 1]} {ordinal(day)}, {year_words(year)}"


def _month_day(m: re.Match[str]) -> str | None:
    """"December 4, 2026" -> "December 4th, 20 26"."""
    day = int(m.group(2))
    if not 1 <= day <= 31:
        return None
    year = f", {year_words(int(m.group(4)))}" if m.group(3) else ""
    return f"{m.group(1)} {ordinal(day)}{year}"


def _day_month(m: re.Match[str]) -> str | None:
    """"4 December 2026" -> "the 4th of December, 20 26"."""
    day = int(m.group(1))
    if not 1 <= day <= 31:
        return None
    year = f", {year_words(int(m.group(4)))}" if m.group(3) else ""
    return f"the {ordinal(day)} of {m.group(2)}{year}"


def _year_range(m: re.Match[str]) -> str | None:
    first, second = m.group(1), m.group(2)
    y1 = int(first)
    y2 = int(second) if len(second) == 4 else (y1 // 100) * 100 + int(second)
    if not y1 < y2 < y1 + 100:
        return None
    end = year_words(y2) if len(second) == 4 else (str(int(second)) if int(second) >= 10 else f"oh {int(second)}")
    return f"{year_words(y1)} to {end}"


_RULES_CACHE: list[tuple[re.Pattern[str], object]] = []


def _rules() -> list[tuple[re.Pattern[str], object]]:
    if _RULES_CACHE:
        return _RULES_CACHE
    titles = "|".join(_TITLES)
    rules: list[tuple[str, object]] = [
        # dates and times first: their digits must not be taken by the money or year rules
        (r"\b(\d{4})-(\d{2})-(\d{2})\b", _iso_date),
        (r"\b(\d{1,2}):(\d{2})\b(\s?(?:[AaPp]\.[Mm]\.|[AaPp][Mm]\b))?", "time"),
        (r"(?<=\d)\s?([AaPp])\.?[Mm]\.(?=\s|$)", "ampm"),
        (rf"\b({_MONTH_ABBRS})\.?(?=\s+\d)", lambda m: _MONTH_ABBR[m.group(1)]),
        (rf"\b({_MONTH_NAMES})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(,?\s+(\d{{4}})\b)?", _month_day),
        (rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_NAMES})\b(,?\s+(\d{{4}})\b)?", _day_month),
        # money before plain numbers
        (r"(?<!\w)(US|A|C|NZ|HK)?([$£€¥])\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
         r"(?:\s?(thousand|million|billion|trillion|mn|bn|tn|m|k)\b)?", _money),
        (r"(?<=\d)\s?(bn|tn)\b", lambda m: " " + _SCALES[m.group(1)]),
        # years
        (r"\b(1[1-9]\d\d|20\d\d)[-–](\d{4}|\d{2})\b(?![-–]\d)", _year_range),
        (r"\b(1[1-9]|20)(\d)0s\b", lambda m: f"{m.group(1)} {_DECADES[m.group(2)]}" if m.group(1) != "20"
         or m.group(2) != "0" else "two thousands"),
        (r"(?<![\w'])['’](\d)0s\b", lambda m: _DECADES[m.group(1)]),
        (rf"\b({_YEAR_CUES})(\s+|-)(1[1-9]\d\d|20\d\d)\b(?![,.]?\d)",
         lambda m: f"{m.group(1)}{m.group(2)}{year_words(int(m.group(3)))}"),
        # 2010-2099 standing alone is a year in the news ("2050 jobs" would be misread; rare)
        (r"(?<![\w$£€¥.,])(20[1-9]\d)\b(?![,.]?\d|%|\s?(?:thousand|million|billion|trillion)\b)",
         lambda m: year_words(int(m.group(1)))),
        # abbreviations whose dot would end the sentence
        (rf"\b({titles})\.(?=\s+[A-Z])", lambda m: _TITLES[m.group(1)]),
        (r"\b(Jr|Sr)\.(?=\s+[a-z,]|,)", lambda m: _SUFFIXES[m.group(1)]),
        (r"\bNo\.(?=\s*\d)", lambda m: "number"),
        (r"#(?=\d)", lambda m: "number "),
        # fractions and slashes between numbers
        (r"(?<![\d/])(\d{1,2})/(\d{1,2})(?![\d/])",
         lambda m: _FRACTIONS.get(m.group(0), f"{m.group(1)} {m.group(2)}")),
        # units after a number
        (r"(?<=\d)\s?(km/h|kph|mph|km|kg|cm|mm|ft|lbs|lb|°C|°F)(?![\w/])", "unit"),
    ]
    for pattern, fn in rules:
        _RULES_CACHE.append((re.compile(pattern), fn))
    return _RULES_CACHE


def normalize(text: MappedText | str) -> MappedText:
    """``text`` with numbers, dates, times, money and abbreviations rewritten as a newsreader says them."""
    mt = text if isinstance(text, MappedText) else MappedText.of(text)
    for pattern, fn in _rules():
        if fn == "time":
            mt = mt.sub(pattern, lambda m, text=mt.text: _time(m, text))
        elif fn == "ampm":
            mt = mt.sub(pattern, lambda m, text=mt.text: " " + ("AM" if m.group(1) in "aA" else "PM")
                        + _sentence_dot(m, text))
        elif fn == "unit":
            mt = mt.sub(pattern, lambda m, text=mt.text: _unit(m, text))
        else:
            mt = mt.sub(pattern, fn)  # type: ignore[arg-type]
    return mt
