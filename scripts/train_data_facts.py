"""The fact tables of the training conversations (scripts/make_train_data.py), written for this project.

Plain data: the generators of make_train_data.py draw questions and answers from them (a change here changes the
committed data/chat.jsonl.xz, which `make_train_data.py --out data --seed 0` reproduces byte for byte), and
scripts/make_battery.py takes PREAMBLES through make_train_data.py.
"""

CAPITALS = [  # country, capital, continent
    ("France", "Paris", "Europe"), ("Germany", "Berlin", "Europe"), ("Italy", "Rome", "Europe"),
    ("Spain", "Madrid", "Europe"), ("Portugal", "Lisbon", "Europe"), ("Ireland", "Dublin", "Europe"),
    ("the United Kingdom", "London", "Europe"), ("Belgium", "Brussels", "Europe"),
    ("the Netherlands", "Amsterdam", "Europe"), ("Switzerland", "Bern", "Europe"), ("Austria", "Vienna", "Europe"),
    ("Poland", "Warsaw", "Europe"), ("Czechia", "Prague", "Europe"), ("Hungary", "Budapest", "Europe"),
    ("Greece", "Athens", "Europe"), ("Sweden", "Stockholm", "Europe"), ("Norway", "Oslo", "Europe"),
    ("Denmark", "Copenhagen", "Europe"), ("Finland", "Helsinki", "Europe"), ("Iceland", "Reykjavik", "Europe"),
    ("Romania", "Bucharest", "Europe"), ("Bulgaria", "Sofia", "Europe"), ("Ukraine", "Kyiv", "Europe"),
    ("Russia", "Moscow", "Europe"), ("Turkey", "Ankara", "Asia"), ("Croatia", "Zagreb", "Europe"),
    ("Serbia", "Belgrade", "Europe"), ("Estonia", "Tallinn", "Europe"), ("Latvia", "Riga", "Europe"),
    ("Lithuania", "Vilnius", "Europe"), ("Japan", "Tokyo", "Asia"), ("China", "Beijing", "Asia"),
    ("India", "New Delhi", "Asia"), ("South Korea", "Seoul", "Asia"), ("Thailand", "Bangkok", "Asia"),
    ("Vietnam", "Hanoi", "Asia"), ("Indonesia", "Jakarta", "Asia"), ("the Philippines", "Manila", "Asia"),
    ("Malaysia", "Kuala Lumpur", "Asia"), ("Pakistan", "Islamabad", "Asia"), ("Bangladesh", "Dhaka", "Asia"),
    ("Nepal", "Kathmandu", "Asia"), ("Iran", "Tehran", "Asia"), ("Iraq", "Baghdad", "Asia"),
    ("Saudi Arabia", "Riyadh", "Asia"), ("Israel", "Jerusalem", "Asia"), ("Mongolia", "Ulaanbaatar", "Asia"),
    ("Egypt", "Cairo", "Africa"), ("Kenya", "Nairobi", "Africa"), ("Nigeria", "Abuja", "Africa"),
    ("Ethiopia", "Addis Ababa", "Africa"), ("Ghana", "Accra", "Africa"), ("Morocco", "Rabat", "Africa"),
    ("Algeria", "Algiers", "Africa"), ("Tunisia", "Tunis", "Africa"), ("Senegal", "Dakar", "Africa"),
    ("Uganda", "Kampala", "Africa"), ("Zimbabwe", "Harare", "Africa"), ("Angola", "Luanda", "Africa"),
    ("the United States", "Washington, D.C.", "North America"), ("Canada", "Ottawa", "North America"),
    ("Mexico", "Mexico City", "North America"), ("Cuba", "Havana", "North America"),
    ("Jamaica", "Kingston", "North America"), ("Brazil", "Brasilia", "South America"),
    ("Argentina", "Buenos Aires", "South America"), ("Chile", "Santiago", "South America"),
    ("Peru", "Lima", "South America"), ("Colombia", "Bogota", "South America"),
    ("Venezuela", "Caracas", "South America"), ("Ecuador", "Quito", "South America"),
    ("Uruguay", "Montevideo", "South America"), ("Australia", "Canberra", "Oceania"),
    ("New Zealand", "Wellington", "Oceania"), ("Fiji", "Suva", "Oceania"),
]

OPPOSITES = [
    ("hot", "cold"), ("big", "small"), ("up", "down"), ("left", "right"), ("fast", "slow"), ("happy", "sad"),
    ("light", "dark"), ("day", "night"), ("old", "new"), ("young", "old"), ("tall", "short"), ("long", "short"),
    ("open", "closed"), ("full", "empty"), ("wet", "dry"), ("hard", "soft"), ("heavy", "light"),
    ("strong", "weak"), ("rich", "poor"), ("early", "late"), ("first", "last"), ("in", "out"), ("on", "off"),
    ("yes", "no"), ("push", "pull"), ("win", "lose"), ("buy", "sell"), ("give", "take"), ("near", "far"),
    ("high", "low"), ("thick", "thin"), ("clean", "dirty"), ("loud", "quiet"), ("easy", "difficult"),
    ("true", "false"), ("inside", "outside"), ("above", "below"), ("before", "after"), ("begin", "end"),
    ("love", "hate"), ("friend", "enemy"), ("black", "white"), ("north", "south"), ("east", "west"),
    ("good", "bad"), ("cheap", "expensive"), ("sweet", "sour"), ("asleep", "awake"), ("always", "never"),
    ("arrive", "leave"), ("remember", "forget"), ("laugh", "cry"), ("question", "answer"), ("wide", "narrow"),
    ("deep", "shallow"), ("sharp", "blunt"), ("safe", "dangerous"), ("brave", "afraid"), ("alive", "dead"),
    ("summer", "winter"), ("top", "bottom"), ("front", "back"), ("add", "subtract"), ("max", "min"),
    ("increase", "decrease"), ("success", "failure"), ("polite", "rude"), ("noisy", "silent"),
    ("smooth", "rough"), ("lost", "found"), ("start", "finish"), ("come", "go"), ("maximum", "minimum"),
]

WORD_USES = {}
for _pair in OPPOSITES:
    for _w in _pair:
        WORD_USES[_w] = WORD_USES.get(_w, 0) + 1

COLOUR_MIX = [("blue", "yellow", "green"), ("red", "yellow", "orange"), ("red", "blue", "purple"),
              ("red", "white", "pink"), ("black", "white", "grey"), ("blue", "white", "light blue"),
              ("red", "green", "brown"), ("yellow", "white", "cream")]
THING_COLOURS = [("the sky", "blue"), ("grass", "green"), ("a banana", "yellow"), ("snow", "white"),
                 ("coal", "black"), ("a strawberry", "red"), ("a carrot", "orange"), ("a lemon", "yellow"),
                 ("a tomato", "red"), ("chocolate", "brown"), ("milk", "white"), ("the sun", "yellow"),
                 ("a leaf in summer", "green"), ("a fire engine", "red"), ("a pumpkin", "orange"),
                 ("the sea", "blue"), ("an elephant", "grey"), ("a frog", "green"), ("a crow", "black"),
                 ("a polar bear", "white"), ("a lime", "green"), ("a plum", "purple"), ("soil", "brown"),
                 ("an orange", "orange"), ("a flamingo", "pink"), ("cheese", "yellow"), ("ink", "black")]
RAINBOW = ["red", "orange", "yellow", "green", "blue", "indigo", "violet"]

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [("January", 31), ("February", 28), ("March", 31), ("April", 30), ("May", 31), ("June", 30),
          ("July", 31), ("August", 31), ("September", 30), ("October", 31), ("November", 30), ("December", 31)]
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth"]

UNITS = [  # big unit, small unit, factor (plural names)
    ("kilometres", "metres", 1000), ("metres", "centimetres", 100), ("centimetres", "millimetres", 10),
    ("metres", "millimetres", 1000), ("kilograms", "grams", 1000), ("litres", "millilitres", 1000),
    ("hours", "minutes", 60), ("minutes", "seconds", 60), ("days", "hours", 24), ("weeks", "days", 7),
    ("years", "months", 12), ("dozens", "items", 12)]
SINGULAR = {"kilometres": "kilometre", "metres": "metre", "centimetres": "centimetre", "millimetres": "millimetre",
            "kilograms": "kilogram", "grams": "gram", "litres": "litre", "millilitres": "millilitre",
            "hours": "hour", "minutes": "minute", "seconds": "second", "days": "day", "weeks": "week",
            "years": "year", "months": "month", "dozens": "dozen", "items": "item"}

WORDS = ("apple house green water river stone table chair window garden school friend mother father sister "
         "brother orange yellow purple flower summer winter spring autumn morning evening planet rocket cloud "
         "rain snow storm bread butter cheese milk tiger horse rabbit mouse eagle shark whale dolphin pencil paper "
         "book letter music piano guitar dance happy quiet light night bright candle forest mountain island ocean "
         "desert bridge castle city village market doctor teacher farmer sailor garden kitchen pocket basket "
         "silver golden rabbit turtle monkey zebra camel lemon cherry grape melon potato tomato carrot onion "
         "blanket pillow mirror ladder hammer button jacket shoe sock hat glove train plane boat car bicycle "
         "clock phone lamp door floor wall roof street road field farm barn honey sugar salt pepper").split()
WORDS = list(dict.fromkeys(WORDS))  # unique, first-seen order

ANIMAL_LEGS = [("a spider", 8), ("an insect", 6), ("an ant", 6), ("a dog", 4), ("a cat", 4), ("a horse", 4),
               ("a cow", 4), ("a bird", 2), ("a chicken", 2), ("a human", 2), ("an octopus", 8), ("a snake", 0),
               ("a fish", 0), ("a crab", 10), ("a bee", 6), ("a frog", 4), ("a duck", 2), ("an elephant", 4)]
ANIMAL_SOUNDS = [("a cow", "moo"), ("a dog", "woof"), ("a cat", "meow"), ("a duck", "quack"), ("a sheep", "baa"),
                 ("a lion", "roar"), ("an owl", "hoot"), ("a pig", "oink"), ("a horse", "neigh"),
                 ("a bee", "buzz"), ("a snake", "hiss"), ("a frog", "croak"), ("a rooster", "cock-a-doodle-doo")]
ANIMAL_BABIES = [("a dog", "puppy"), ("a cat", "kitten"), ("a cow", "calf"), ("a sheep", "lamb"),
                 ("a horse", "foal"), ("a frog", "tadpole"), ("a duck", "duckling"), ("a bear", "cub"),
                 ("a goat", "kid"), ("a swan", "cygnet"), ("a kangaroo", "joey"), ("a hen", "chick")]
SHAPES = [("a triangle", 3), ("a square", 4), ("a rectangle", 4), ("a pentagon", 5), ("a hexagon", 6),
          ("an octagon", 8), ("a circle", 0)]
PLANETS = ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune"]

FACTS = [  # (question variants, answer, short answer, reasoning)
    (["Which planet is the largest?", "What is the largest planet in the solar system?",
      "What is the biggest planet?"], "Jupiter is the largest planet in the solar system.", "Jupiter.",
     "The planets are Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and Neptune. The biggest one is a gas "
     "giant, Jupiter."),
    (["Which planet is closest to the sun?", "What is the closest planet to the sun?"],
     "Mercury is the closest planet to the sun.", "Mercury.", "In order from the sun the first planet is Mercury."),
    (["Which planet is known as the red planet?", "What is the red planet?"],
     "Mars is known as the red planet.", "Mars.", "The planet that looks red because of rusty dust is Mars."),
    (["What planet do we live on?", "Which planet is our home?"], "We live on the planet Earth.", "Earth.",
     "People live on the third planet from the sun, Earth."),
    (["How many planets are in the solar system?", "How many planets are there?"],
     "There are 8 planets in the solar system.", "8.", "Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and "
     "Neptune: that is 8 planets."),
    (["What is the chemical formula of water?", "What is the formula for water?"],
     "The chemical formula of water is H2O.", "H2O.", "Water is two hydrogen atoms and one oxygen atom, so H2O."),
    (["At what temperature does water freeze in Celsius?", "What is the freezing point of water in Celsius?"],
     "Water freezes at 0 degrees Celsius.", "0 degrees Celsius.", "Pure water freezes at 0 degrees Celsius, "
     "which is 32 degrees Fahrenheit."),
    (["At what temperature does water boil in Celsius?", "What is the boiling point of water in Celsius?"],
     "Water boils at 100 degrees Celsius at sea level.", "100 degrees Celsius.", "At sea level water boils at "
     "100 degrees Celsius, which is 212 degrees Fahrenheit."),
    (["Who wrote Romeo and Juliet?", "Who is the author of Romeo and Juliet?"],
     "Romeo and Juliet was written by William Shakespeare.", "William Shakespeare.",
     "Romeo and Juliet is a play from the 1590s by the English writer William Shakespeare."),
    (["What is the largest ocean?", "Which ocean is the biggest?"], "The Pacific Ocean is the largest ocean.",
     "The Pacific Ocean.", "The oceans are the Pacific, Atlantic, Indian, Southern and Arctic. The Pacific is the "
     "largest."),
    (["What is the tallest mountain in the world?", "Which mountain is the highest?"],
     "Mount Everest is the tallest mountain in the world.", "Mount Everest.",
     "The highest mountain above sea level is Mount Everest in the Himalayas."),
    (["What gas do plants breathe in?", "Which gas do plants take from the air?"],
     "Plants take in carbon dioxide from the air.", "Carbon dioxide.",
     "Plants use carbon dioxide and sunlight to make food, and they give out oxygen."),
    (["What gas do we need to breathe?", "Which gas do people breathe in?"], "We need oxygen to breathe.",
     "Oxygen.", "Our lungs take oxygen from the air."),
    (["How many hours are in a day?"], "There are 24 hours in a day.", "24.", "One day has 24 hours."),
    (["How many continents are there?"], "There are 7 continents.", "7.", "Africa, Antarctica, Asia, Australia, "
     "Europe, North America and South America: 7 continents."),
    (["What is the fastest land animal?"], "The cheetah is the fastest land animal.", "The cheetah.",
     "The cheetah can run faster than any other animal on land."),
    (["What is the largest animal?", "What is the biggest animal in the world?"],
     "The blue whale is the largest animal.", "The blue whale.", "The blue whale is bigger than any other animal, "
     "even the dinosaurs."),
    (["How many sides does a dice have?", "How many faces does a dice have?"], "A dice has 6 faces.", "6.",
     "A normal dice is a cube, and a cube has 6 faces."),
]

EXPLANATIONS = [  # (question variants, answer) — short explanations written for this project
    (["Why is the sky blue?", "Why does the sky look blue?"],
     "Sunlight is made of all colours. When it passes through the air, the small gas molecules scatter blue light "
     "much more than red light, so blue light comes to our eyes from every part of the sky."),
    (["Why are leaves green?", "Why are plants green?"],
     "Leaves contain chlorophyll, which plants use to make food from sunlight. Chlorophyll absorbs red and blue "
     "light and reflects green light, so leaves look green."),
    (["Why do we have seasons?", "What causes the seasons?"],
     "The Earth is tilted. As it goes around the sun, one half leans towards the sun and gets more direct light "
     "and longer days, which is summer, while the other half has winter."),
    (["Why does ice float?", "Why does ice float on water?"],
     "Water expands when it freezes, so ice is less dense than liquid water. Anything less dense than water "
     "floats, so ice stays on top."),
    (["What makes a rainbow?", "How does a rainbow form?"],
     "A rainbow forms when sunlight shines through raindrops. Each drop bends the light and splits it into its "
     "colours: red, orange, yellow, green, blue, indigo and violet."),
    (["Why is the sea salty?", "Why is sea water salty?"],
     "Rivers carry tiny amounts of salt from rocks into the sea. When sea water evaporates the salt stays "
     "behind, so over millions of years the sea became salty."),
    (["What is gravity?", "Can you explain gravity?"],
     "Gravity is the force that pulls things towards each other. The Earth's gravity pulls objects down to the "
     "ground and keeps the Moon moving around the Earth."),
    (["How do plants make food?", "What is photosynthesis?"],
     "Plants make food by photosynthesis. They use sunlight to turn water and carbon dioxide into sugar, and they "
     "give out oxygen."),
    (["What is the water cycle?", "Can you explain the water cycle?"],
     "The sun warms water in seas and lakes and it evaporates. The vapour rises, cools and forms clouds. The "
     "water falls back as rain or snow and flows back to the sea."),
    (["Why do we need sleep?", "Why do people sleep?"],
     "Sleep lets the body and brain rest and repair. While we sleep the brain sorts our memories, and without "
     "enough sleep it is hard to think clearly."),
    (["Why does the moon change shape?", "Why does the moon have phases?"],
     "The moon does not really change shape. As it goes around the Earth, we see different amounts of its sunlit "
     "half, from a thin crescent to a full moon."),
    (["What is a computer?", "Can you explain what a computer is?"],
     "A computer is a machine that follows instructions called programs. It stores numbers, does arithmetic on "
     "them very quickly, and shows the results on a screen."),
    (["What are the primary colours?", "Which colours are primary colours?"],
     "The primary colours of paint are red, yellow and blue. You can mix them to make the other colours, for "
     "example blue and yellow make green."),
    (["Why do birds fly south in winter?", "Why do birds migrate?"],
     "Many birds fly to warmer places in winter because food becomes hard to find when it is cold. In spring "
     "they fly back to build nests and raise their young."),
    (["What is a diffusion language model?", "How do you write your answers?"],
     "A diffusion language model writes a whole block of text at once. It starts from random tokens and "
     "improves them over several steps until the block makes sense, then it moves on to the next block."),
]

GREETINGS = [
    (["Hello!", "Hello", "Hi!", "Hi there!", "Good morning!", "Hey!"], "Hello! How can I help you today?"),
    (["Who are you?", "What are you?", "What is your name?"],
     "I am DG Tiny, a very small diffusion language model made to test the diffgemma engine. I know simple facts "
     "about numbers, words, colours, days, months and capital cities."),
    (["What can you do?", "How can you help me?"],
     "I can answer simple questions about arithmetic, days and months, opposites, colours, units and capital "
     "cities, and I can use a calculator when one is available."),
    (["Thank you!", "Thanks!", "Thank you very much."], "You're welcome!"),
    (["Goodbye!", "Bye!", "See you later!"], "Goodbye! Have a nice day."),
    (["How are you?", "How are you today?"], "I am fine, thank you. How can I help you?"),
]

PREAMBLES = [
    "I am writing a quiz for my class and I want to check one of the answers.",
    "My friend and I were arguing about this yesterday and we could not agree.",
    "I am helping my younger brother with his homework tonight.",
    "Please answer briefly and clearly.",
    "This is for a school project about the world.",
    "I have been reading a lot of books lately and I got curious.",
    "We are playing a trivia game with the whole family this evening.",
    "I think I knew this once but I have forgotten it.",
    "Here is a simple question for you, and there is no trick in it.",
    "I am preparing for a test next week and I want to be sure.",
    "My teacher asked us this today and I want to double check.",
    "I am planning a long trip and I am learning a few facts before I go.",
]
