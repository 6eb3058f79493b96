"""The pools and schemas behind ``structgen bench values``' cases (:mod:`structgen.bench.values_cases`): names,
cities, companies, products, dates and the six record kinds' realistic schemas (titles, descriptions, formats,
enums, patterns, nested objects and arrays).  Data only; the generator that draws from it is values_cases."""
from __future__ import annotations

import datetime as _dt

# --------------------------------------------------------------------------- pools

FIRST = ["Maria", "Kenji", "Aisha", "Lukas", "Sofia", "Daniel", "Priya", "Mateo", "Chloe", "Omar", "Elena",
         "Jonas", "Fatima", "Lucas", "Ingrid", "Samuel", "Mei", "Tomasz", "Nadia", "Hugo", "Amara", "Felix",
         "Yuki", "Carmen", "Ravi", "Olivia", "Emeka", "Hannah", "Diego", "Leila", "Noah", "Zara", "Anders",
         "Sakura", "Pablo", "Grace", "Ibrahim", "Clara", "Viktor", "Ana"]
LAST = ["Lopez", "Watanabe", "Khan", "Becker", "Rossi", "Okafor", "Sharma", "Fernandez", "Dubois", "Haddad",
        "Novak", "Larsen", "Silva", "Kowalski", "Nguyen", "Muller", "Schmidt", "Ivanova", "Moreau", "Tanaka",
        "Mensah", "Andersson", "Costa", "Petrov", "Kim", "Walsh", "Hughes", "Ortiz", "Bauer", "Yilmaz", "Chen",
        "Patel", "Garcia", "Fischer", "Jensen", "Rahman", "Santos", "Weber", "Murphy", "Adeyemi"]
CITIES = [("Lisbon", "Portugal"), ("Lyon", "France"), ("Osaka", "Japan"), ("Toronto", "Canada"),
          ("Nairobi", "Kenya"), ("Krakow", "Poland"), ("Melbourne", "Australia"), ("Bogota", "Colombia"),
          ("Munich", "Germany"), ("Seville", "Spain"), ("Chennai", "India"), ("Gothenburg", "Sweden"),
          ("Porto", "Portugal"), ("Denver", "United States"), ("Edinburgh", "United Kingdom"),
          ("Auckland", "New Zealand"), ("Valparaiso", "Chile"), ("Rotterdam", "Netherlands"), ("Accra", "Ghana"),
          ("Hanoi", "Vietnam"), ("Bergen", "Norway"), ("Turin", "Italy"), ("Cork", "Ireland"),
          ("Busan", "South Korea"), ("Montreal", "Canada"), ("Graz", "Austria"), ("Austin", "United States"),
          ("Cape Town", "South Africa"), ("Tallinn", "Estonia"), ("Brno", "Czech Republic")]
COMPANIES = [("Northwind Traders", "northwind.com"), ("Blue Harbor Logistics", "blueharbor.io"),
             ("Fernleaf Labs", "fernleaf.dev"), ("Orbitel Systems", "orbitel.net"),
             ("Granite Peak Insurance", "granitepeak.com"), ("Lumen Analytics", "lumen-analytics.com"),
             ("Copperline Energy", "copperline.energy"), ("Tidewater Foods", "tidewaterfoods.com"),
             ("Kestrel Robotics", "kestrel.ai"), ("Silverpine Health", "silverpine.org"),
             ("Quarry Street Media", "quarrystreet.co"), ("Aster Biotech", "asterbio.com"),
             ("Maplewood Bank", "maplewoodbank.com"), ("Redwing Aviation", "redwing.aero"),
             ("Vantage Textiles", "vantagetextiles.com"), ("Brightwater Studios", "brightwater.tv"),
             ("Helix Software", "helixsoft.io"), ("Cobalt Freight", "cobaltfreight.com"),
             ("Pioneer Dental", "pioneerdental.com"), ("Sable and Finch Legal", "sablefinch.law")]
JOB_TITLES = ["software engineer", "account manager", "data analyst", "head of marketing", "product designer",
              "operations director", "sales representative", "research scientist", "customer success lead",
              "chief financial officer", "project coordinator", "human resources partner", "office manager",
              "logistics planner", "legal counsel"]
#: (name, price range, SKU prefix)
PRODUCTS = [("Ergonomic Office Chair", (89, 349), "CHR"), ("Wireless Keyboard", (19, 129), "KBD"),
            ("27-inch Monitor", (149, 499), "MON"), ("USB-C Docking Station", (59, 229), "DOC"),
            ("Noise-Cancelling Headphones", (79, 399), "AUD"), ("Standing Desk", (199, 799), "DSK"),
            ("Laser Printer", (99, 449), "PRN"), ("HD Webcam", (29, 149), "CAM"),
            ("Portable SSD", (69, 189), "SSD"), ("Desk Lamp", (15, 89), "LMP"),
            ("Espresso Machine", (129, 699), "KIT"), ("Hiking Backpack", (49, 219), "BAG"),
            ("Yoga Mat", (12, 79), "SPT"), ("Cast Iron Skillet", (25, 99), "KIT"),
            ("Electric Kettle", (19, 89), "KIT"), ("Trail Running Shoes", (59, 189), "SHO"),
            ("Winter Jacket", (89, 329), "CLO"), ("Bluetooth Speaker", (25, 199), "AUD"),
            ("Graphics Tablet", (49, 399), "TAB"), ("Mechanical Pencil Set", (5, 39), "STA")]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF"]
EVENT_PREFIX = ["Annual", "Spring", "Autumn", "Global", "Regional", "Winter", "Summer", "International", ""]
EVENT_TOPICS = ["Data Science", "Urban Gardening", "Cloud Security", "Jazz", "Renewable Energy", "Indie Game",
                "Street Food", "Robotics", "Photography", "Open Source", "Climate Policy", "Product Management",
                "Bioinformatics", "Craft Beer", "Chess", "Documentary Film"]
EVENT_TYPES = ["Summit", "Festival", "Meetup", "Conference", "Workshop", "Fair", "Symposium", "Hackathon", "Expo"]
VENUES = ["Grand Hall", "Riverside Pavilion", "Central Library", "Harbour Conference Centre", "Old Town Theatre",
          "Botanical Garden", "Innovation Hub", "City Museum", "Union Square Arena", "Lakeside Hotel",
          "Warehouse Nine", "Civic Auditorium"]
TITLE_ADJ = ["Silent", "Hidden", "Broken", "Golden", "Last", "Distant", "Crimson", "Forgotten", "Endless", "Paper",
             "Winter", "Glass", "Burning", "Quiet", "Wild"]
TITLE_NOUN = ["Harbor", "Orchard", "Compass", "Kingdom", "Letters", "River", "Archive", "Garden", "Machine",
              "Lighthouse", "Empire", "Frontier", "Atlas", "Tide", "Forest"]
PUBLISHERS = ["Penguin Random House", "HarperCollins", "Faber and Faber", "Hachette", "Bloomsbury", "Macmillan",
              "Vintage", "Oxford University Press", "Tor Books", "Picador", "Canongate", "Granta"]
GENRES = ["fiction", "mystery", "science fiction", "fantasy", "biography", "history", "poetry", "popular science"]
AIRPORTS = [("Lisbon", "LIS"), ("Paris", "CDG"), ("Frankfurt", "FRA"), ("Tokyo", "HND"), ("Toronto", "YYZ"),
            ("Nairobi", "NBO"), ("Madrid", "MAD"), ("Amsterdam", "AMS"), ("Dubai", "DXB"), ("New York", "JFK"),
            ("Singapore", "SIN"), ("Sydney", "SYD"), ("Oslo", "OSL"), ("Rome", "FCO"), ("Istanbul", "IST"),
            ("Bogota", "BOG"), ("Seoul", "ICN"), ("Mumbai", "BOM"), ("Zurich", "ZRH"), ("Dublin", "DUB")]
AIRLINES = ["TP", "AF", "LH", "NH", "AC", "KQ", "IB", "KL", "EK", "DL", "SQ", "QF", "SK", "AZ", "TK", "U2"]
CABINS = ["economy", "premium economy", "business", "first"]
RESTAURANTS = ["Casa Lucia", "The Copper Pot", "Sakura Garden", "Le Petit Zinc", "Blue Olive", "Spice Route",
               "Nordic Table", "Taqueria Sol", "Golden Dragon", "Trattoria Roma", "The Green Fig", "Harbour Grill"]
TOOL_CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "INR"]
SUBJECTS = ["Quarterly report", "Meeting moved to Thursday", "Invoice 4471", "Welcome aboard",
            "Draft contract for review", "Team offsite plans", "Updated price list", "Interview schedule",
            "Server maintenance tonight", "Budget approval"]

DATE0 = _dt.date(2024, 1, 1)


# --------------------------------------------------------------------------- schemas

_PHONE = r"^[+(]?[0-9][0-9 ()-]{6,19}$"
_TIME = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"

CONTACT_SCHEMA = {
    "title": "Contact",
    "description": "A person's contact details.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Full name"},
        "email": {"type": "string", "format": "email"},
        "phone": {"type": "string", "pattern": _PHONE, "description": "Phone number as written"},
        "company": {"type": "string", "description": "Current employer"},
        "job_title": {"type": "string"},
        "address": {
            "type": "object",
            "description": "Where the person is based",
            "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
            "required": ["city"],
        },
    },
    "required": ["name", "email"],
}

ORDER_SCHEMA = {
    "title": "OrderLine",
    "description": "One line of a customer order.",
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
        "customer": {"type": "string", "description": "Full name of the customer"},
        "product": {"type": "string"},
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$", "description": "Item code"},
        "quantity": {"type": "integer", "minimum": 1},
        "unit_price": {"type": "number", "minimum": 0},
        "currency": {"type": "string", "enum": CURRENCIES},
        "discount_percent": {"type": "integer", "minimum": 0, "maximum": 100},
        "shipping": {
            "type": "object",
            "properties": {"method": {"type": "string", "enum": ["standard", "express", "pickup"]},
                           "city": {"type": "string"}},
            "required": ["method"],
            "additionalProperties": False,
        },
    },
    "required": ["order_id", "product", "quantity", "unit_price", "currency"],
    "additionalProperties": False,
}

EVENT_SCHEMA = {
    "title": "Event",
    "description": "A scheduled public event.",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "start_time": {"type": "string", "pattern": _TIME, "description": "24-hour HH:MM"},
        "location": {
            "type": "object",
            "properties": {"venue": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city"],
        },
        "organizer": {"type": "string"},
        "format": {"type": "string", "enum": ["in-person", "online", "hybrid"]},
        "speakers": {"type": "array", "items": {"type": "string"}, "description": "Names of the speakers"},
        "capacity": {"type": "integer", "minimum": 1, "description": "Maximum number of attendees"},
    },
    "required": ["name", "date", "location"],
}

BOOK_SCHEMA = {
    "title": "Book",
    "description": "Bibliographic record of a book.",
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "authors": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "year": {"type": "integer", "minimum": 1450, "maximum": 2030, "description": "Year of first publication"},
        "publisher": {"type": "string"},
        "isbn": {"type": "string", "pattern": r"^97[89]-[0-9]{1,5}-[0-9]{1,7}-[0-9]{1,7}-[0-9]$"},
        "genre": {"type": "string", "enum": GENRES},
        "pages": {"type": "integer", "minimum": 1},
        "series": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "number": {"type": "integer", "minimum": 1}},
            "required": ["name", "number"],
        },
    },
    "required": ["title", "authors"],
}

FLIGHT_SCHEMA = {
    "title": "FlightBooking",
    "description": "An airline booking.",
    "type": "object",
    "properties": {
        "booking_reference": {"type": "string", "pattern": "^[A-Z0-9]{6}$"},
        "passenger": {
            "type": "object",
            "properties": {"first_name": {"type": "string"}, "last_name": {"type": "string"},
                           "email": {"type": "string", "format": "email"}},
            "required": ["first_name", "last_name"],
            "additionalProperties": False,
        },
        "segments": {
            "type": "array",
            "description": "Flights in travel order",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "flight_number": {"type": "string", "pattern": "^[A-Z0-9]{2}[0-9]{1,4}$"},
                    "from": {"type": "string", "pattern": "^[A-Z]{3}$",
                             "description": "IATA code of the departure airport"},
                    "to": {"type": "string", "pattern": "^[A-Z]{3}$",
                           "description": "IATA code of the arrival airport"},
                    "date": {"type": "string", "format": "date"},
                },
                "required": ["flight_number", "from", "to", "date"],
            },
        },
        "cabin": {"type": "string", "enum": CABINS},
        "checked_bags": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["booking_reference", "passenger", "segments"],
}

TOOL_SCHEMAS = {
    "get_weather": {
        "title": "get_weather",
        "description": "Arguments of get_weather(city, unit, days): the weather forecast for a city.",
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "Number of forecast days"},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    "book_table": {
        "title": "book_table",
        "description": "Arguments of book_table(restaurant, party_size, date, time, name): reserve a table.",
        "type": "object",
        "properties": {
            "restaurant": {"type": "string"},
            "party_size": {"type": "integer", "minimum": 1, "maximum": 20},
            "date": {"type": "string", "format": "date"},
            "time": {"type": "string", "pattern": _TIME},
            "name": {"type": "string", "description": "Name the reservation is under"},
        },
        "required": ["restaurant", "party_size", "date"],
        "additionalProperties": False,
    },
    "convert_currency": {
        "title": "convert_currency",
        "description": "Arguments of convert_currency(amount, from_currency, to_currency).",
        "type": "object",
        "properties": {
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "from_currency": {"type": "string", "enum": TOOL_CURRENCIES},
            "to_currency": {"type": "string", "enum": TOOL_CURRENCIES},
        },
        "required": ["amount", "from_currency", "to_currency"],
        "additionalProperties": False,
    },
    "send_email": {
        "title": "send_email",
        "description": "Arguments of send_email(to, subject, cc): send an email.",
        "type": "object",
        "properties": {
            "to": {"type": "string", "format": "email"},
            "subject": {"type": "string"},
            "cc": {"type": "array", "items": {"type": "string", "format": "email"}},
        },
        "required": ["to", "subject"],
        "additionalProperties": False,
    },
}

#: schema name -> schema (``Case.schema_name``)
SCHEMAS: dict[str, dict] = {"contact": CONTACT_SCHEMA, "order": ORDER_SCHEMA, "event": EVENT_SCHEMA,
                            "book": BOOK_SCHEMA, "flight": FLIGHT_SCHEMA,
                            **{f"tool_call/{k}": v for k, v in TOOL_SCHEMAS.items()}}
