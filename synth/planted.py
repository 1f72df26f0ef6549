"""Hand-written bodies of the planted corpus cases: other languages and pages each quality filter drops."""

from __future__ import annotations

#: (language code, title, paragraphs): real news-like prose, dropped at stage "lang".
FOREIGN: list[tuple[str, str, list[str]]] = [
    ("de", "Stadtrat beschließt neuen Haushalt für das kommende Jahr", [
        "Der Stadtrat hat am Dienstagabend nach einer langen und zum Teil hitzigen Debatte den Haushalt für das kommende Jahr beschlossen.",
        "Die Mehrheit der Abgeordneten stimmte für den Entwurf der Verwaltung, der vor allem höhere Ausgaben für Schulen, Radwege und den öffentlichen Nahverkehr vorsieht.",
        "Die Opposition kritisierte dagegen, dass die Verschuldung der Stadt weiter steigen werde, und forderte strengere Sparmaßnahmen bei den Verwaltungskosten.",
        "Der Bürgermeister zeigte sich nach der Abstimmung zufrieden und sprach von einem wichtigen Signal für die Zukunft der Stadt und ihrer Bewohner.",
        "Viele Bürgerinnen und Bürger hatten die Sitzung im Rathaus verfolgt, einige von ihnen äußerten sich anschließend enttäuscht über die geplanten Gebührenerhöhungen.",
        "Die ersten Bauprojekte sollen bereits im Frühjahr beginnen, wenn das Wetter es zulässt und die Aufträge vergeben sind.",
    ]),
    ("fr", "Le gouvernement présente un plan pour relancer le train régional", [
        "Le gouvernement a présenté mercredi un plan ambitieux destiné à relancer les lignes ferroviaires régionales, souvent jugées trop lentes et peu fiables par les usagers.",
        "Selon le ministre des Transports, plusieurs milliards d'euros seront investis au cours des dix prochaines années pour moderniser les voies et acheter de nouveaux trains.",
        "Les élus locaux ont salué une annonce attendue depuis longtemps, tout en demandant des garanties sur le calendrier des travaux et sur le financement.",
        "Les associations d'usagers restent prudentes et rappellent que de nombreuses promesses similaires n'ont jamais été tenues par les gouvernements précédents.",
        "Dans les petites villes, beaucoup d'habitants espèrent que ces investissements permettront enfin de réduire leur dépendance à la voiture pour aller travailler.",
        "Un premier bilan des travaux doit être présenté au Parlement avant la fin de l'année prochaine.",
    ]),
    ("es", "La sequía obliga a restringir el uso de agua en varias comarcas", [
        "Las autoridades regionales anunciaron el lunes nuevas restricciones al uso del agua en varias comarcas afectadas por una sequía que dura ya más de dos años.",
        "A partir de la próxima semana estará prohibido regar jardines y llenar piscinas privadas, y los ayuntamientos deberán reducir el consumo en parques y fuentes públicas.",
        "Los agricultores de la zona advierten que las pérdidas en las cosechas de este año podrían ser las más graves de las últimas décadas si no llueve pronto.",
        "El consejero de Medio Ambiente pidió a los ciudadanos que hagan un uso responsable del agua y aseguró que el suministro en los hogares está garantizado.",
        "Los embalses se encuentran actualmente por debajo del veinte por ciento de su capacidad, según los datos publicados por la confederación hidrográfica.",
        "Los expertos recuerdan que la situación podría repetirse con más frecuencia en el futuro debido al cambio climático.",
    ]),
    ("pt", "Hospital regional inaugura nova ala de atendimento pediátrico", [
        "O hospital regional inaugurou nesta sexta-feira uma nova ala dedicada ao atendimento de crianças, com quarenta leitos e equipamentos modernos.",
        "A obra, que levou quase três anos para ser concluída, foi financiada em parte pelo governo estadual e em parte por doações de empresas da região.",
        "Segundo a direção do hospital, a nova estrutura deve reduzir de forma significativa o tempo de espera para consultas e internações pediátricas.",
        "Durante a cerimônia, o secretário de Saúde afirmou que outras unidades do interior também receberão investimentos nos próximos meses.",
        "Famílias que aguardavam atendimento comemoraram a abertura da ala, mas lembraram que ainda faltam médicos especialistas em várias cidades vizinhas.",
        "A contratação de novos profissionais deve ser anunciada até o final do semestre, de acordo com a secretaria.",
    ]),
    ("it", "Il comune approva il progetto per la nuova biblioteca del quartiere", [
        "Il consiglio comunale ha approvato ieri sera il progetto per la costruzione di una nuova biblioteca nel quartiere nord, attesa da molti anni dai residenti.",
        "L'edificio sorgerà al posto di un vecchio magazzino abbandonato e ospiterà sale di lettura, spazi per i bambini e un piccolo auditorium per incontri e concerti.",
        "Il sindaco ha spiegato che i lavori dovrebbero iniziare entro la fine dell'estate e durare circa diciotto mesi, salvo imprevisti.",
        "Alcuni consiglieri dell'opposizione hanno espresso dubbi sui costi dell'opera e hanno chiesto maggiore trasparenza nella scelta delle imprese.",
        "Le associazioni culturali del quartiere hanno accolto con entusiasmo la notizia e hanno già proposto di organizzare corsi e laboratori per i giovani.",
        "Secondo l'assessore alla cultura, la biblioteca diventerà un punto di incontro importante per tutta la città.",
    ]),
]

#: Russian page served as windows-1251 (declared): decodes, then dropped at stage "lang".
RUSSIAN = ("Городской совет утвердил план ремонта дорог", [
    "Городской совет во вторник утвердил план ремонта дорог на ближайшие три года, который предусматривает обновление более двухсот улиц.",
    "По словам мэра, работы начнутся весной и будут проводиться в основном ночью, чтобы не создавать пробок в часы пик.",
    "Жители нескольких районов давно жаловались на плохое состояние дорог и отсутствие тротуаров возле школ и больниц.",
    "Депутаты от оппозиции поддержали план, но потребовали регулярно публиковать отчеты о расходах и сроках выполнения работ.",
    "Первые результаты ремонта горожане смогут увидеть уже летом, пообещали в администрации.",
])

#: English text with accented words: served as cp1252 bytes while the header says utf-8.
CP1252_TEXT = ("Café owners in Harbor City welcome the return of the summer market", [
    "The summer market returned to the old harbor square on Saturday, and café owners along the waterfront said it was the busiest morning they had seen in months.",
    "Stallholders sold cheese from Zürich, pâté from a family farm near the coast, and crêpes made to a recipe that one baker said had been in her family for generations.",
    "“We were worried that the rain would keep people at home,” said one organizer, who added that more than three thousand visitors had come through the gates before noon.",
    "The council agreed last year to close the square to traffic on market days, a decision that some residents opposed at the time but that now appears to have wide support.",
    "Musicians played near the fountain throughout the afternoon, and a small stage hosted a naïve art exhibition put together by pupils from two local schools.",
    "The market will run every Saturday until the end of September, and organizers hope to add an evening session in August if the weather stays fine.",
])

#: English text with non-ASCII characters, served as utf-8 with no charset declared anywhere.
NO_CHARSET_TEXT = ("Museum exhibition traces the history of the coastal railway", [
    "A new exhibition at the maritime museum traces the history of the coastal railway, from its opening in the nineteenth century to the last steam services in the 1960s.",
    "Visitors can walk through a restored carriage, study the original timetables, and listen to recordings of former drivers describing the journey along the cliffs.",
    "The curator said the museum had spent almost two years collecting photographs and letters from families whose relatives had worked on the line.",
    "One section is devoted to the engineers who built the viaduct over the estuary, which was considered a remarkable achievement when it opened – and still carries trains today.",
    "Entry to the exhibition is free for children, and the museum will offer guided tours every weekend until the end of the year.",
])


#: The planted quality pages (by intended reason) that the `news` profile keeps: it relaxes exactly
#: these rules for real news (docs/corpus_quality.md: letters over non-symbol words, >= 3 sentences,
#: no `{` rule, no minimum share of punctuated lines, which a bullet list without full stops also meets).
#: The truth records them as kept under `news` (`kept_by`); tests/synth/test_synth.py checks this table
#: against the profile itself.
NEWS_KEEPS = frozenset({"gopher_alpha_words", "c4_curly_bracket", "c4_too_few_sentences", "fineweb_punct_lines",
                        "gopher_bullet_lines"})


def quality_pages(city: str, person: str) -> list[tuple[str, str, list[str]]]:
    """(intended reason, title, body lines) for pages each quality filter must drop.

    Every page is English and passes the filters that run before its own; the generator checks the
    first failing reason with `checks.first_quality_reason` and records it (and the reason under a
    blank-line paragraph join, if that differs) in truth.json.
    """
    pages: list[tuple[str, str, list[str]]] = []
    pages.append(("gopher_short_doc", "Road closed after water main break", [
        f"A water main burst early on Tuesday near the central station in {city}, and the road will stay closed for most of the day.",
        "Drivers should use the ring road instead.",
    ]))
    tags = ["#news", "#local", "#traffic", "#weather", "#breaking", "#community", "#update", "#city"]
    lines = []
    sentences = [
        f"Crowds gathered in {city} for the spring parade on Sunday afternoon",
        "The marching bands played until the sun went down over the river",
        "Food stalls were busy and the queues for ice cream stretched along the square",
        "Organizers said the event was the largest in ten years",
        "Children waved flags from the steps of the old town hall",
        "Police reported no incidents and thanked the public for their patience",
        "Volunteers cleared the streets within an hour of the final float",
        "Next year the parade will follow a longer route through the harbor district",
    ]
    for i, s in enumerate(sentences):
        lines.append(f"{s} {tags[i % 8]} {tags[(i + 3) % 8]} {tags[(i + 5) % 8]}.")
    pages.append(("gopher_symbol_ratio", f"Spring parade in {city} draws record crowds", lines))
    pages.append(("gopher_ellipsis_ratio", f"Residents react to the new parking rules in {city}", [
        "Well... we did not... expect this... but the council... has changed the rules again... and people are... not happy.",
        "One shop owner said... honestly... that the new fees... would drive... customers away... for good.",
        "Another resident was calmer... she said... the changes might... perhaps... reduce traffic... near the school.",
        "The council says... and this is... the official line... that the money... will be spent... on the roads.",
        "Drivers have until... the first... of next month... to buy... a permit... before the fines begin.",
        "Meanwhile... the debate... goes on... with a meeting... at the town hall... and a petition... signed by hundreds.",
    ]))
    pages.append(("gopher_bullet_lines", f"{city} council meeting: the main decisions", [
        "• New budget for road repairs approved by a large majority",
        "• Library opening hours extended into the evening from next month",
        "• Plans for a second bus depot sent back to the planning committee",
        "• Grants for community gardens doubled for the coming year",
        "• Parking charges near the hospital frozen until the spring",
        "• Youth football pitches to be resurfaced over the summer holidays",
        "• Consultation on the harbor redevelopment extended by four weeks",
        "• Street lighting in the old town to be replaced with efficient lamps",
        "• Public toilets in the central park to reopen after repairs",
        "• Council tax rise capped at two percent for most households",
        "• Recycling collections to move to a weekly schedule in the summer",
        "• Funding agreed for a new playground beside the river path",
        "• Review of taxi licensing rules to begin before the end of the year",
        "• Volunteer awards evening to return to the town hall in the autumn",
    ]))
    pages.append(("gopher_ellipsis_lines", f"Overheard at the {city} market this weekend", [
        "The fish seller was telling everyone that the prices would go up again after the holiday...",
        "A woman at the flower stall said she had never seen so many tourists in the spring...",
        "Two old friends argued about the football for almost an hour next to the bakery...",
        "The baker himself insisted that the new oven had changed the taste of everything...",
        "Someone at the cheese counter claimed that the mayor had been seen buying olives...",
        "A busker played the same three songs all morning and nobody seemed to mind...",
        "The market inspector walked past twice with a clipboard and a worried expression...",
        "By the afternoon the rain had started and the stalls began to pack up early...",
    ]))
    pages.append(("gopher_alpha_words", "Regional exchange: closing prices of the week", [
        "Closing prices on the regional exchange for the week, in cents per share, with the weekly change.",
        "Northwind 14250 (+125), Bluepeak 9875 (-240), Corvane 30410 (+1180), Halcyon 7720 (-35), Ironleaf 11860 (+410).",
        "Lumenar 6645 (+90), Meridian 21370 (-515), Nexora 4410 (+65), Quillon 18200 (+700), Redstone 9930 (-120).",
        "Solvane 15575 (+330), Tessaro 8120 (-45), Veritas 27740 (+960), Wexford 5505 (-210), Ardent 12390 (+275).",
        "Volume in shares: 1204300, 884150, 2310775, 450920, 1775040, 930215, 618400, 2044610, 745380, 1390005.",
        "Index level 48215 after 47730 last week and 46980 a month ago, the highest close since 2019.",
        "Traders said the market was quiet for most of the week, with little news from the big companies.",
    ]))
    pages.append(("gopher_stop_words", "Weekend sports roundup", [
        f"Harbor City Mariners beat Northfield Rangers on Saturday evening as striker {person} scored twice.",
        "Eastbrook Falcons drew at Port Alder, a late penalty rescuing a point for visiting fans.",
        "Silverton Comets lost again, now five games without a win; coach promises changes soon.",
        "Basketball: Mapleford Titans edged Kingsreach Herons after overtime, guard Anton Falk finishing on thirty points.",
        "Hockey: Redwater Wolves stay top after beating Ashby Foxes, goalkeeper Hugo Calder making many saves.",
        "Rugby: Stonemere Knights crushed Lakeshire Otters, scoring six tries in front of a sellout crowd.",
        "Next weekend: derby day in Brightmoor, plus cup quarterfinals on Sunday afternoon.",
    ]))
    para = [
        f"The ferry service between {city} and the islands will run on a reduced timetable this week.",
        "Passengers are advised to check departure times before travelling to the terminal.",
        "The operator said that one of its two vessels is undergoing scheduled maintenance.",
        "Normal services are expected to resume on Monday morning if the repairs go to plan.",
    ]
    pages.append(("gopher_dup_para_frac", f"Ferry timetable changes for {city} services",
                  para + para + para[:2]))
    lorem = [
        f"The new arts center in {city} opened its doors to the public on Friday after two years of building work.",
        "Visitors were able to tour the galleries, the theater and the rooftop terrace, which offers views across the whole bay.",
        "The director said the program for the first season would include concerts, exhibitions and workshops for schools.",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
        "Tickets for the opening concert sold out within an hour, and a second performance has been added for the following week.",
        "Local businesses hope that the center will bring more visitors to the old harbor district throughout the year.",
    ]
    pages.append(("c4_lorem_ipsum", f"New arts center opens in {city}", lorem))
    pages.append(("c4_curly_bracket", f"City website relaunch brings new online services to {city}", [
        f"The council in {city} relaunched its website on Monday with a new design and several online services for residents.",
        "Residents can now book bulky waste collections, pay parking fines and report broken street lights without calling the office.",
        "A developer who worked on the project said the old site had been built more than fifteen years ago and was hard to maintain.",
        "Early feedback shows a template error on the contact page, which reads {{ form.contact_email }} instead of an address.",
        "The council said the problem would be fixed within days and apologized to anyone who had trouble sending a message.",
        "Officials expect more than half of all requests to arrive online by the end of the year.",
    ]))
    pages.append(("c4_too_few_sentences", f"Harbor restoration work in {city} reaches a milestone", [
        f"Engineers working on the restoration of the old harbor wall in {city} said this week that the most difficult part of the project, the replacement of the stone foundations below the waterline, had been completed ahead of schedule and within the budget agreed by the council two years ago.",
        "The next phase, which includes new railings, lighting and a wider promenade for pedestrians and cyclists, is expected to begin in the spring and to last for around eighteen months, with parts of the waterfront remaining open to the public throughout the work.",
        "Local fishermen, who had worried that the construction would disrupt their moorings for a whole season, said that the contractors had kept them informed and that the disruption had been far smaller than they had feared at the start of the project.",
    ]))
    pages.append(("fineweb_punct_lines", f"What is on in {city} this week", [
        "Open air cinema returns to the park with a season of classic films for the whole family",
        "Farmers market moves to the old station yard while the square is resurfaced",
        "Jazz quartet from the conservatory plays a free lunchtime concert at the library",
        "Photography exhibition on the history of the harbor opens at the town museum",
        "Guided walk along the cliffs with the ranger service leaves from the lighthouse car park",
        "Book fair for children and young readers fills the community hall all weekend",
        "Charity fun run raises money for the hospital and the local lifeboat crew",
        "Late opening at the botanical gardens with lanterns and music after dark",
    ]))
    pages.append(("fineweb_short_lines", f"Quick notes from the {city} weekend", [
        "Rain is expected soon.",
        "The bridge is closed.",
        "Buses run every hour.",
        "The museum is free.",
        "Markets open at eight.",
        "Parking is limited today.",
        "The pool reopens Monday.",
        "Tickets are still available.",
        "The library has new hours.",
        "Traffic was heavy on Friday night along the coast road, with delays of up to an hour near the harbor.",
        "Police asked drivers to be patient and to avoid the town center during the festival.",
        "Volunteers will collect litter on the beach on Sunday morning and more helpers are welcome.",
    ]))
    pages.append(("fineweb_dup_line_chars", f"Library extends opening hours across {city}", [
        f"The public library in {city} will stay open until nine in the evening on weekdays from next month.",
        "The change follows a survey in which most members asked for longer hours after work and school.",
        "Subscribe to our newsletter for the latest local news and events delivered every morning.",
        "The library will also open on Sunday afternoons for the first time, with a small team of staff and volunteers.",
        "Councillors agreed to fund the extra hours for one year and will review the results next spring.",
        "Subscribe to our newsletter for the latest local news and events delivered every morning.",
        "The chief librarian said the new hours would make it easier for families and students to use the study rooms.",
        "A new section for teenagers and a room for quiet study will open on the first floor later this year.",
    ]))
    return pages
