"""Word lists and patterns of the offline fact extractor (see ``_rules.py``)."""

from __future__ import annotations

from typing import Final

from actormem.recorder._text import _alt, _rx, _words

__all__: list[str] = []

# -- lexicons ------------------------------------------------------------------------------------

_NAME: Final = r"[A-Z][\w'-]*"
_NOT_NAMES: Final = _words(
    "Sorry Sure Fine Good Glad Happy Here Back Done Ready Not Just Okay Ok Afraid Tired Busy "
    "Going Trying Looking Still Also Really New Hungry Excited Interested So Very Single "
    "Married Engaged Divorced Retired Vegan Vegetarian Pregnant Allergic The A An In At On "
    "From Working Learning Thinking Curious Sure Home Off Always Never Actually Honestly"
)
_PARTICLES: Final = r"(?:de|da|do|del|la|le|of|upon|am|on|an der)\b"
_PLACE: Final = (
    rf"((?:[A-Z][\w'.-]*|{_PARTICLES})(?:[ -](?:[A-Z][\w'.-]*|{_PARTICLES}))*(?<![ .-]))"
)
_OCCUPATIONS: Final = _alt(
    "nurse teacher engineer developer programmer doctor physician surgeon dentist lawyer "
    "attorney accountant architect designer electrician plumber carpenter mechanic chef cook "
    "baker waiter waitress barista pharmacist scientist researcher professor lecturer manager "
    "consultant analyst translator writer author journalist editor photographer artist "
    "musician actor actress pilot driver firefighter officer soldier farmer librarian "
    "therapist psychologist veterinarian vet paramedic cashier salesperson entrepreneur "
    "founder CEO CTO freelancer contractor clerk secretary receptionist tutor coach trainer "
    "counselor counsellor banker economist nanny caregiver midwife technician inspector "
    "surveyor intern student dietitian nutritionist optician physiotherapist economist "
    "streamer youtuber illustrator animator producer director bartender butcher tailor "
    "hairdresser barber janitor cleaner courier postman miner welder landscaper realtor "
    "broker trader investor auditor administrator diplomat politician priest pastor rabbi "
    "imam chemist biologist physicist mathematician statistician geologist"
)
_RELATIVES: Final = _alt(
    "wife husband son sons daughter daughters sister sisters brother brothers mom mum mother "
    "dad father parents grandma grandmother granny grandpa grandfather grandparents aunt "
    "uncle cousin cousins nephew niece nieces nephews grandson granddaughter grandkids "
    "grandchildren kids kid children child twins baby stepson stepdaughter stepmom stepdad "
    "in-laws oldest youngest eldest siblings sibling boys girls"
)
_PARTNERS: Final = _alt(
    "girlfriend boyfriend partner fiancé fiancée fiance fiancee spouse ex-wife ex-husband"
)
_ANIMALS: Final = _alt(
    "dog dogs cat cats puppy puppies kitten kittens beagle labrador lab poodle greyhound "
    "retriever terrier spaniel collie husky pug dachshund corgi parrot bird birds goldfish "
    "fish hamster hamsters rabbit rabbits bunny horse horses pony tortoise turtle snake "
    "lizard gecko ferret chickens hens budgie cockatiel canary iguana axolotl pig parakeet "
    "cockatoo macaw chinchilla hedgehog rat rats mouse mice alpaca goat goats sheep duck "
    "ducks frog tarantula"
)
_LANGUAGES: Final = _alt(
    "English Spanish French German Italian Portuguese Japanese Mandarin Chinese Cantonese "
    "Korean Arabic Hindi Polish Russian Dutch Swedish Norwegian Danish Finnish Greek Turkish "
    "Hebrew Urdu Bengali Punjabi Tamil Telugu Swahili Vietnamese Thai Tagalog Indonesian "
    "Ukrainian Czech Hungarian Romanian Catalan Basque Welsh Irish Persian Farsi Yoruba "
    "Igbo Amharic Malay Icelandic Latin"
)
_HEALTH: Final = _rx(
    r"\b(?:allerg\w*|intoleran\w*|diabet\w*|asthma\w*|migraines?|surgery|operation|"
    r"diagnos\w*|medication|medicine|insulin|pregnan\w*|penicillin|pain|hay fever|"
    r"blood pressure|celiac|coeliac|broke|broken|sprained|fractured|wheelchair|injur\w*|"
    r"disease|illness|condition|cancer|depression|anxiety|arthritis|physio\w*|chronic|"
    r"disabilit\w*|hearing aids?|inhaler|epilep\w*|cholesterol|therapy|sick|recovering|"
    r"eczema|thyroid|concussion|cast|glasses|contacts|contact lenses|braces|pacemaker|adhd|"
    r"autism|autistic|dyslexia|dyslexic|ocd|ptsd|bipolar|ibs|crohn's|lupus|copd|covid|"
    r"insomnia|sleep apnea|tinnitus|gout|anemia|anaemia|hypertension|endometriosis|pcos)\b"
)
_DIET_WORDS: Final = (
    r"vegetarian|vegan|pescatarian|pescetarian|keto|paleo|gluten|dairy|halal|kosher|meat|"
    r"pork|beef|chicken|fish|seafood|sugar|alcohol|booze|coffee|caffeine|decaf|espresso|"
    r"tea|oat milk|almond milk|soy milk|milk|carbs|bread|fasting|spicy food|junk food|"
    r"red meat|eggs|cheese|soda|wine|beer|snacks|sweets|plant-based|whole30|low-carb"
)
_DIET: Final = _rx(
    rf"\b(?:i(?:'m| am|'ve been| have been) (?:a |now |fully |mostly |strictly )*"
    rf"(?:{_DIET_WORDS})n?\b|"
    rf"(?:eat|eats|eating|drink|drinks|drinking|diet|ate|keep|avoid|avoiding|cut out|"
    rf"gave up|give up|quit|stopped eating|stopped drinking|switched to|went|gone|cutting out|"
    rf"can't do|cannot do|can't have|cannot have|can't eat|cannot eat|no|free|"
    rf"cut down on|cutting down on|cutting back on)\b.*"
    rf"\b(?:{_DIET_WORDS})\b|\b(?:{_DIET_WORDS})\b.*\bdiet\b|\bintermittent fasting\b)"
)
_POSSESSIONS: Final = _alt(
    "car cars bike bikes bicycle motorcycle motorbike scooter house flat apartment condo "
    "cabin cottage boat yacht piano guitar guitars laptop computer pc phone iphone android "
    "camera kindle tablet ipad watch ps5 playstation xbox console tv truck van rv caravan "
    "drone telescope tesla volvo toyota honda bmw audi ford jeep subaru mazda prius "
    "macbook mac pixel samsung galaxy thinkpad airpods fitbit garmin vespa kayak canoe "
    "tent e-bike ebike "
    "garden sewing-machine synthesizer keyboard vinyl records collection"
)
_HOBBY: Final = _rx(
    r"\b(?:i(?:'ve| have)? (?:been )?(?:play(?:ed|ing)?|practi[cs]e|knit|crochet|sew|paint|"
    r"draw|sketch|swim|surf|ski|snowboard|skate|climb|hike|cycle|bike|garden|fish|sing|dance|"
    r"bake|brew|meditate|row|box|fence|juggle|write poetry|write songs|code|program)\b|"
    r"\bi (?:run|jog|cycle|swim|walk) \d+\s?(?:k|km|miles?)\b|"
    r"\bi (?:go|went) \w+ing\b|\bmy (?:hobby|hobbies|passion|side hustle)\b|"
    r"\bi (?:run|jog|swim|cycle|walk|hike|skate|surf|row|train) (?:every|each|most|on|twice|"
    r"three times|daily|regularly|at|before|after)\b|"
    r"\bi(?:'m| am) training for\b|\bi (?:take|started|joined) (?:a |an )?(?:\w+ )?"
    r"(?:class|classes|lessons|course|club)\b|\bi can (?:code|play|cook|draw|sing|swim|knit|"
    r"dance|speak)\b|\bi(?:'m| am) (?:good|great|decent) at\b|\bis my thing\b|"
    r"\bi spend my (?:weekends|evenings|free time|mornings)\b|\bi do (?:yoga|pilates|"
    r"woodworking|crossfit|karate|judo|taekwondo|archery|pottery|photography|improv)\b|"
    r"\bi(?:'ve| have) played\b)",
)
_MONTHS: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAYS: Final = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_WHEN: Final = _rx(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|"
    rf"{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS}(?:,? \d{{4}})?|"
    rf"(?:in|this|next|until|by|before|after) {_MONTHS}|"
    rf"(?:on|this|next|by|until) {_WEEKDAYS}|{_WEEKDAYS}(?: morning| night| evening)?|"
    rf"(?:next|this|coming) (?:week|weekend|month|year|summer|winter|spring|fall|autumn)|"
    rf"on the \d{{1,2}}(?:st|nd|rd|th)|tomorrow|tonight|in \d+ (?:days|weeks|months))\b"
)
_FUTURE: Final = _rx(
    r"\b(?:will|'ll|going to|gonna|planning|plan to|plan on|about to|have got|'ve got|have|"
    r"has|is|are|'m|'re|am|start|starts|flying|leaving|moving|visiting|getting|having|"
    r"heading|running|presenting|throwing|due|close|booked|scheduled|appointment|graduate|"
    r"finish|leave|arrive|return|fly|travel|begin|retire|move|give birth)\b"
)
#: A date that can only lie ahead: a plan whatever the tense ("we fly ... next friday").
_AHEAD: Final = _rx(
    rf"\b(?:next|this coming|coming) (?:{_WEEKDAYS}|week|weekend|month|year|summer|winter|"
    rf"spring|fall|autumn)|\btomorrow\b|\btonight\b|\bin \d+ (?:days|weeks|months)\b"
)
_PAST: Final = _rx(r"\b(?:had|was|were|went|did|(?<!'ve )(?<!have )got|last|ago|yesterday)\b")
_STANDING_REQUEST: Final = _rx(
    r"^(?:please\s+)?(?:always|never|from now on|don't|do not|stop|avoid|use|keep|be|"
    r"address|start|give|just give|reply|respond|answer|write|call me|talk|speak|explain|"
    r"no more|only|make|show|include|try)\b"
)
_ABOUT_ANSWERS: Final = _rx(
    r"\b(?:your (?:answers?|replies|responses?|tone|style)|answers?|replies|reply|respond|"
    r"responses?|emojis?|units|spelling|jargon|"
    r"sources|bullet(?: points)?|tables|formal|casual|tone|me by|explanations?|examples|"
    r"summary|details?|detail|language|markdown|code|short|concise|brief|verbose|"
    r"metric|imperial|from now on)\b"
)
_FORMAT_PREFS: Final = _rx(
    r"\b(?:bullet points|tables|short answers|long answers|step[- ]by[- ]step|markdown|"
    r"plain text|examples|code only|emojis|numbered lists)\b"
)
_NOT_LIKED: Final = _words(
    "that this it idea your you suggestion plan sound sounds them those these everything "
    "what how when where to hearing"
)
